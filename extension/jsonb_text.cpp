// The text form of a jsonb value, as jsonb_out prints it (jsonb_text.hpp).
#include "jsonb_text.hpp"

#include <cstring>

namespace pg_inbox {
namespace {

// Whether any of the 8 bytes is a control character, '"' or '\\' (SWAR:
// a byte's high bit is set in the result when it is below 0x20 or equal
// to one of the two).
bool any_to_escape(uint64 eight) {
  constexpr uint64 ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
  auto zero_byte = [&](uint64 v) { return (v - ones) & ~v & highs; };
  uint64 below_space = (eight - ones * 0x20) & ~eight & highs;
  return (below_space | zero_byte(eight ^ (ones * '"')) | zero_byte(eight ^ (ones * '\\'))) != 0;
}

// escape_json's output: the string quoted, with \b \f \n \r \t \" \\ and
// \u00XX for the other control characters.
void append_string(StringInfo out, const char *bytes, int length) {
  appendStringInfoChar(out, '"');
  int plain_from = 0;
  for (int i = 0; i < length; ++i) {
    uint64 eight;
    while (i + 8 <= length && (std::memcpy(&eight, bytes + i, 8), !any_to_escape(eight))) i += 8;
    if (i == length) break;
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    appendBinaryStringInfo(out, bytes + plain_from, i - plain_from);
    plain_from = i + 1;
    switch (c) {
      case '\b':
        appendBinaryStringInfo(out, "\\b", 2);
        break;
      case '\f':
        appendBinaryStringInfo(out, "\\f", 2);
        break;
      case '\n':
        appendBinaryStringInfo(out, "\\n", 2);
        break;
      case '\r':
        appendBinaryStringInfo(out, "\\r", 2);
        break;
      case '\t':
        appendBinaryStringInfo(out, "\\t", 2);
        break;
      case '"':
        appendBinaryStringInfo(out, "\\\"", 2);
        break;
      case '\\':
        appendBinaryStringInfo(out, "\\\\", 2);
        break;
      default:
        appendStringInfo(out, "\\u%04x", static_cast<int>(c));
        break;
    }
  }
  appendBinaryStringInfo(out, bytes + plain_from, length - plain_from);
  appendStringInfoChar(out, '"');
}

void append_scalar(StringInfo out, const JsonbValue &value) {
  switch (value.type) {
    case jbvNull:
      appendBinaryStringInfo(out, "null", 4);
      break;
    case jbvString:
      append_string(out, value.val.string.val, value.val.string.len);
      break;
    case jbvNumeric:
      appendStringInfoString(out, DatumGetCString(DirectFunctionCall1(
                                      numeric_out, NumericGetDatum(value.val.numeric))));
      break;
    case jbvBool:
      if (value.val.boolean)
        appendBinaryStringInfo(out, "true", 4);
      else
        appendBinaryStringInfo(out, "false", 5);
      break;
    default:
      elog(ERROR, "pg_inbox: unexpected jsonb scalar type %d", value.type);
  }
}

}  // namespace

void append_jsonb_text(StringInfo out, Jsonb *value) {
  JsonbIterator *it = JsonbIteratorInit(&value->root);
  JsonbValue v;
  JsonbIteratorToken token = WJB_DONE;
  bool first = true;        // nothing written yet at this level: no ", "
  bool raw_scalar = false;  // a top-level scalar: a one-element array without brackets
  bool redo = false;        // a key's value is a container: handle the token just read
  while (redo || (token = JsonbIteratorNext(&it, &v, false)) != WJB_DONE) {
    redo = false;
    switch (token) {
      case WJB_BEGIN_ARRAY:
        if (!first) appendBinaryStringInfo(out, ", ", 2);
        if (v.val.array.rawScalar)
          raw_scalar = true;
        else
          appendStringInfoChar(out, '[');
        first = true;
        break;
      case WJB_BEGIN_OBJECT:
        if (!first) appendBinaryStringInfo(out, ", ", 2);
        appendStringInfoChar(out, '{');
        first = true;
        break;
      case WJB_KEY:
        if (!first) appendBinaryStringInfo(out, ", ", 2);
        first = true;
        append_scalar(out, v);
        appendBinaryStringInfo(out, ": ", 2);
        token = JsonbIteratorNext(&it, &v, false);
        if (token == WJB_VALUE) {
          first = false;
          append_scalar(out, v);
        } else {
          redo = true;
        }
        break;
      case WJB_ELEM:
        if (!first) appendBinaryStringInfo(out, ", ", 2);
        first = false;
        append_scalar(out, v);
        break;
      case WJB_END_ARRAY:
        if (!raw_scalar) appendStringInfoChar(out, ']');
        first = false;
        break;
      case WJB_END_OBJECT:
        appendStringInfoChar(out, '}');
        first = false;
        break;
      default:
        elog(ERROR, "pg_inbox: unexpected jsonb token %d", static_cast<int>(token));
    }
  }
}

}  // namespace pg_inbox
