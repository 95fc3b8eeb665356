// A core layer including a layer above it must not build: compiled with prism_transport's
// include settings (common/ and transport/ only). The first include proves that view
// works; the second must fail with "node_manager/node.h: No such file or directory".
#include "transport/codec.h"
#include "node_manager/node.h"
