// Version texts to decimal numbers (version_text.hpp). Strict on purpose:
// a timestamp Postgres would read loosely ("now", "tomorrow", "12/1/26")
// must not become a version.
#include "version_text.hpp"

#include <cstdint>

namespace pg_inbox {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// n digits at text[at], as a number; false when any is not a digit.
bool digits(std::string_view text, std::size_t at, std::size_t n, int64_t &out) {
  if (at + n > text.size()) return false;
  out = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (!is_digit(text[i])) return false;
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

bool is_decimal(std::string_view text) {
  std::size_t i = text.empty() || text[0] != '-' ? 0 : 1;
  std::size_t int_start = i;
  while (i < text.size() && is_digit(text[i])) ++i;
  if (i == int_start) return false;
  if (i == text.size()) return true;
  if (text[i] != '.') return false;
  std::size_t frac_start = ++i;
  while (i < text.size() && is_digit(text[i])) ++i;
  return i == text.size() && i > frac_start;
}

bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in_month(int64_t y, int64_t m) {
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : days[m - 1];
}

// Days from 1970-01-01 to y-m-d, proleptic Gregorian (H. Hinnant's algorithm).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// seconds + fraction (its digits, at most 9) as a decimal text. Whole
// seconds and the fraction are written apart: in units of the fraction a
// year-9999 instant overflows 64 bits.
std::string decimal_seconds(int64_t seconds, std::string_view fraction) {
  int64_t scale = 1, f = 0;
  for (char c : fraction) {
    scale *= 10;
    f = f * 10 + (c - '0');
  }
  bool negative = seconds < 0;
  // -2 s + 0.25 s = -(1 + 0.75) s
  if (negative && f > 0) {
    seconds += 1;
    f = scale - f;
  }
  std::string out = (negative ? "-" : "") + std::to_string(negative ? -seconds : seconds);
  if (!fraction.empty()) {
    std::string digits_text = std::to_string(f);
    out += "." + std::string(fraction.size() - digits_text.size(), '0') + digits_text;
  }
  return out;
}

std::optional<std::string> rfc3339_epoch(std::string_view t) {
  int64_t y, mo, d, h, mi, s;
  if (!digits(t, 0, 4, y) || t.size() < 20 || t[4] != '-' || !digits(t, 5, 2, mo) || t[7] != '-' ||
      !digits(t, 8, 2, d) || (t[10] != 'T' && t[10] != 't' && t[10] != ' ') ||
      !digits(t, 11, 2, h) || t[13] != ':' || !digits(t, 14, 2, mi) || t[16] != ':' ||
      !digits(t, 17, 2, s))
    return std::nullopt;
  // Leap seconds (60) are refused: they have no epoch of their own.
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 ||
      s > 59)
    return std::nullopt;
  std::size_t i = 19;
  std::string_view fraction;
  if (i < t.size() && t[i] == '.') {
    std::size_t start = ++i;
    while (i < t.size() && is_digit(t[i])) ++i;
    if (i == start || i - start > 9) return std::nullopt;
    fraction = t.substr(start, i - start);
  }
  int64_t offset = 0;
  if (i < t.size() && (t[i] == 'Z' || t[i] == 'z')) {
    ++i;
  } else if (i < t.size() && (t[i] == '+' || t[i] == '-')) {
    int64_t oh, om;
    if (!digits(t, i + 1, 2, oh) || i + 3 >= t.size() || t[i + 3] != ':' ||
        !digits(t, i + 4, 2, om) || oh > 23 || om > 59)
      return std::nullopt;
    offset = (oh * 60 + om) * 60 * (t[i] == '-' ? -1 : 1);
    i += 6;
  } else {
    return std::nullopt;  // no zone: the instant would depend on the server's
  }
  if (i != t.size()) return std::nullopt;
  int64_t seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset;
  return decimal_seconds(seconds, fraction);
}

}  // namespace

std::optional<std::string> version_from_text(std::string_view text) {
  if (text.empty() || text.size() > kMaxVersionTextBytes) return std::nullopt;
  if (is_decimal(text)) return std::string(text);
  return rfc3339_epoch(text);
}

}  // namespace pg_inbox
