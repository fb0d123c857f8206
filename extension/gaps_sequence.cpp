#include "gaps_sequence.hpp"

#include <cstring>

namespace pg_inbox::gaps {

bool parse_pattern(const char *text, size_t len, Pattern *out, const char **why) noexcept {
  const char *open = static_cast<const char *>(std::memchr(text, '{', len));
  if (open == nullptr) {
    *why = "the pattern has no {n} placeholder";
    return false;
  }
  size_t prefix_len = static_cast<size_t>(open - text);
  if (prefix_len > kMaxPrefixBytes) {
    *why = "the prefix is longer than 200 bytes";
    return false;
  }
  if (std::memchr(text, '}', prefix_len) != nullptr) {
    *why = "the prefix must not contain braces";
    return false;
  }
  size_t rest = len - prefix_len;
  const char *p = open;
  int width = 1;
  if (rest == 3 && std::memcmp(p, "{n}", 3) == 0) {
    width = 1;
  } else if (rest >= 5 && rest <= 6 && std::memcmp(p, "{n:", 3) == 0 && p[rest - 1] == '}') {
    if (p[3] == '0') {
      *why = "the padding width must be between 1 and 18";
      return false;
    }
    width = 0;
    for (size_t i = 3; i < rest - 1; ++i) {
      if (p[i] < '0' || p[i] > '9') {
        *why = "the padding width must be a number";
        return false;
      }
      width = width * 10 + (p[i] - '0');
    }
    if (width < 1 || width > kMaxWidth) {
      *why = "the padding width must be between 1 and 18";
      return false;
    }
  } else {
    *why = "the pattern must end with {n} or {n:WIDTH}, with nothing after it";
    return false;
  }
  std::memcpy(out->prefix, text, prefix_len);
  out->prefix[prefix_len] = '\0';
  out->prefix_len = prefix_len;
  out->width = width;
  return true;
}

bool parse_number(const Pattern &pattern, const char *id, size_t len, int64_t *number) noexcept {
  if (len < pattern.prefix_len || std::memcmp(id, pattern.prefix, pattern.prefix_len) != 0)
    return false;
  const size_t digits = len - pattern.prefix_len;
  if (digits < static_cast<size_t>(pattern.width) || digits > static_cast<size_t>(kMaxWidth))
    return false;
  int64_t n = 0;
  for (size_t i = pattern.prefix_len; i < len; ++i) {
    if (id[i] < '0' || id[i] > '9') return false;
    n = n * 10 + (id[i] - '0');
  }
  *number = n;
  return true;
}

int digit_count(int64_t n) noexcept {
  int digits = 1;
  while (n >= 10) {
    n /= 10;
    ++digits;
  }
  return digits;
}

size_t format_id(const Pattern &pattern, int64_t n, int length, char *out) noexcept {
  std::memcpy(out, pattern.prefix, pattern.prefix_len);
  char *digits = out + pattern.prefix_len;
  for (int i = length - 1; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + n % 10);
    n /= 10;
  }
  digits[length] = '\0';
  return pattern.prefix_len + static_cast<size_t>(length);
}

int split_blocks(const Pattern &pattern, int64_t from, int64_t to, Block *out) noexcept {
  int count = 0;
  int first = digit_count(from) > pattern.width ? digit_count(from) : pattern.width;
  int last = digit_count(to) > pattern.width ? digit_count(to) : pattern.width;
  int64_t power = 1;  // 10^(length - 1)
  for (int i = 1; i < first; ++i) power *= 10;
  for (int length = first; length <= last; ++length, power *= 10) {
    // Padded ids of `width` digits cover 0 .. 10^width - 1; longer ones
    // have exactly `length` significant digits.
    int64_t lo = length == pattern.width ? 0 : power;
    int64_t hi = length >= kMaxWidth ? kMaxNumber : power * 10 - 1;
    if (lo < from) lo = from;
    if (hi > to) hi = to;
    if (lo <= hi) out[count++] = Block{lo, hi, length};
  }
  return count;
}

Step visit_key(const Pattern &pattern, const Block &block, int64_t window_from, const char *key,
               size_t len, uint64_t *present, int64_t *seek_to) noexcept {
  if (len < pattern.prefix_len + static_cast<size_t>(block.length) ||
      std::memcmp(key, pattern.prefix, pattern.prefix_len) != 0)
    return Step::kNext;
  const char *digits = key + pattern.prefix_len;
  int64_t number = 0;
  for (int i = 0; i < block.length; ++i) {
    if (digits[i] < '0' || digits[i] > '9') return Step::kNext;
    number = number * 10 + (digits[i] - '0');
  }
  size_t tail = len - pattern.prefix_len - static_cast<size_t>(block.length);
  if (tail == 0) {
    if (number >= block.lo && number <= block.hi) {
      int64_t bit = number - window_from;
      present[bit >> 6] |= uint64_t{1} << (bit & 63);
    }
    return number >= block.hi ? Step::kDone : Step::kNext;
  }
  // Longer than the block's ids: everything up to prefix + (number + 1) is
  // longer too, so none of it can be an expected id of this block.
  if (number >= block.hi) return Step::kDone;
  *seek_to = number + 1;
  return Step::kSeek;
}

bool visit_any(const Pattern &pattern, int64_t window_from, int64_t window_to, const char *key,
               size_t len, uint64_t *present) noexcept {
  if (len <= pattern.prefix_len || std::memcmp(key, pattern.prefix, pattern.prefix_len) != 0)
    return false;
  const char *digits = key + pattern.prefix_len;
  size_t length = len - pattern.prefix_len;
  if (length > static_cast<size_t>(kMaxWidth)) return false;
  // The canonical form only: padded to width, and no leading zero beyond it.
  if (length < static_cast<size_t>(pattern.width)) return false;
  if (length > static_cast<size_t>(pattern.width) && digits[0] == '0') return false;
  int64_t number = 0;
  for (size_t i = 0; i < length; ++i) {
    if (digits[i] < '0' || digits[i] > '9') return false;
    number = number * 10 + (digits[i] - '0');
  }
  if (number < window_from || number > window_to) return false;
  int64_t bit = number - window_from;
  present[bit >> 6] |= uint64_t{1} << (bit & 63);
  return true;
}

}  // namespace pg_inbox::gaps
