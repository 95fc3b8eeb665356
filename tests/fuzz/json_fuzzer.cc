// Fuzzes the JSON request path: Serve's Request::Json (a request body as JSON, 400 when it
// is not), Response::Json and the server's ErrorResponse (any bytes in, valid JSON out),
// and internal::ParseJson, the reader of checkpoint records, Tune's journal and results.
//
// Properties: nothing but prism::Error (BadRequestError) is thrown; a body that parses
// nests no deeper than kMaxJsonDepth; what parses dumps to JSON that parses back equal;
// every response body is valid JSON.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "prism/internal/json.h"
#include "prism/serve/http.h"
#include "http/server.h"

namespace {

using prism::fuzz::Fail;

void CheckValidJson(const std::string& text, const char* what) {
  if (!nlohmann::json::accept(text)) Fail(std::string(what) + " is not valid JSON: " + text);
}

void CheckRoundTrip(const nlohmann::json& j, const char* what) {
  const std::string text = j.dump();
  if (nlohmann::json::parse(text) != j) Fail(std::string(what) + " does not read back equal: " + text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  prism::serve::Request request;
  request.body = text;
  try {
    nlohmann::json j = request.Json();
    if (prism::internal::JsonNestingDepth(text) > prism::internal::kMaxJsonDepth)
      Fail("Request::Json accepted a body nested deeper than kMaxJsonDepth");
    CheckRoundTrip(j, "Request::Json's value");
    CheckValidJson(prism::serve::Response::Json({{"got", j}}).body, "Response::Json of it");
  } catch (const prism::serve::BadRequestError&) {
  }

  try {
    nlohmann::json j = prism::internal::ParseJson(text, "fuzz.json");
    CheckRoundTrip(j, "ParseJson's value");
  } catch (const prism::Error&) {
  }

  // The input as a JSON string (any bytes, invalid UTF-8 included) in a response and an
  // error: U+FFFD for what is not UTF-8, never an exception.
  CheckValidJson(prism::serve::Response::Json({{"echo", text}}).body, "Response::Json of raw bytes");
  CheckValidJson(prism::http::ErrorResponse(400, text).body, "ErrorResponse of raw bytes");
  return 0;
}
