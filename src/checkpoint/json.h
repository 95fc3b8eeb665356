#pragma once
// Just enough JSON for the checkpoint's small files (metadata.json, prism_checkpoint.json):
// a parser into a tree of values, a string quoter and a number formatter. Numbers are
// doubles; NaN and +/-Infinity are written and read as the bare words Python's json module
// uses (NaN, Infinity, -Infinity), so a diverged loss survives a round trip.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prism/errors.h"

namespace prism::train::internal {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;  // a string's value; a number's or literal's text as written
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in file order

  /// The member `key` of an object, or nullptr.
  const JsonValue* Find(std::string_view key) const {
    for (const auto& [k, v] : object)
      if (k == key) return &v;
    return nullptr;
  }
};

/// `s` as a JSON string literal, quotes included. Bytes >= 0x80 pass through (UTF-8).
inline std::string JsonQuote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

/// `v` with every bit kept (%.17g), or NaN / Infinity / -Infinity.
inline std::string JsonNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

namespace json_detail {

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  JsonValue ParseDocument() {
    JsonValue v = ParseValue(0);
    SkipSpace();
    if (pos_ != s_.size()) Fail("unexpected text after the JSON value");
    return v;
  }

 private:
  // Nesting deeper than this is not a metadata file; stop before the stack is at risk.
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void Fail(const std::string& what) const {
    throw Error(source_ + ": malformed JSON: " + what + " at byte " + std::to_string(pos_));
  }

  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool Consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  JsonValue ParseValue(int depth) {
    if (depth > kMaxDepth) Fail("nested too deeply");
    SkipSpace();
    if (pos_ >= s_.size()) Fail("unexpected end of input");
    JsonValue v;
    char c = s_[pos_];
    if (c == '{') {
      v.kind = JsonValue::Kind::kObject;
      ++pos_;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return v;
      }
      while (true) {
        SkipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '"') Fail("expected a string key");
        std::string key = ParseString();
        SkipSpace();
        if (pos_ >= s_.size() || s_[pos_] != ':') Fail("expected ':' after a key");
        ++pos_;
        v.object.emplace_back(std::move(key), ParseValue(depth + 1));
        SkipSpace();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == '}') {
          ++pos_;
          return v;
        }
        Fail("expected ',' or '}' in an object");
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::kArray;
      ++pos_;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return v;
      }
      while (true) {
        v.array.push_back(ParseValue(depth + 1));
        SkipSpace();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == ']') {
          ++pos_;
          return v;
        }
        Fail("expected ',' or ']' in an array");
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      v.text = ParseString();
      return v;
    }
    if (Consume("true") || Consume("false")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = s_[pos_ - 4] == 't';  // "true" or "false": both end where we stand
      v.text = v.boolean ? "true" : "false";
      return v;
    }
    if (Consume("null")) {
      v.text = "null";
      return v;
    }
    v.kind = JsonValue::Kind::kNumber;
    size_t start = pos_;
    if (Consume("NaN")) {
      v.number = std::nan("");
    } else if (Consume("Infinity")) {
      v.number = HUGE_VAL;
    } else if (Consume("-Infinity")) {
      v.number = -HUGE_VAL;
    } else {
      // strtod accepts more than JSON (hex, "inf"); only hand it JSON number characters.
      while (pos_ < s_.size() && std::string_view("+-0123456789.eE").find(s_[pos_]) !=
                                     std::string_view::npos)
        ++pos_;
      if (pos_ == start) Fail(std::string("unexpected character '") + c + "'");
      std::string literal(s_.substr(start, pos_ - start));
      char* end = nullptr;
      v.number = std::strtod(literal.c_str(), &end);
      if (end != literal.c_str() + literal.size()) {
        pos_ = start;
        Fail("bad number \"" + literal + "\"");
      }
    }
    v.text = std::string(s_.substr(start, pos_ - start));
    return v;
  }

  unsigned ParseHex4() {
    if (pos_ + 4 > s_.size()) Fail("truncated \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      code <<= 4;
      if (h >= '0' && h <= '9')
        code |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f')
        code |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        code |= static_cast<unsigned>(h - 'A' + 10);
      else
        Fail("bad hex digit in a \\u escape");
    }
    return code;
  }

  static void AppendUtf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // At the opening quote; returns the decoded string and leaves pos_ after the closing one.
  std::string ParseString() {
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) Fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        --pos_;
        Fail("control character inside a string (write it as an escape)");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) Fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = ParseHex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // a UTF-16 pair for a code point past U+FFFF
            if (!Consume("\\u")) Fail("high surrogate without its low half");
            unsigned low = ParseHex4();
            if (low < 0xDC00 || low >= 0xE000) Fail("high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            Fail("low surrogate without its high half");
          }
          AppendUtf8(out, cp);
          break;
        }
        default:
          --pos_;
          Fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  const std::string& source_;
  size_t pos_ = 0;
};

}  // namespace json_detail

/// Parses one JSON document. Throws prism::Error "<source>: malformed JSON: ... at byte N".
inline JsonValue ParseJson(std::string_view text, const std::string& source) {
  return json_detail::Parser(text, source).ParseDocument();
}

}  // namespace prism::train::internal
