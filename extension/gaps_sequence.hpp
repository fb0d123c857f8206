// Expected ids of a `sequence` source (prefix + number, optional zero
// padding) and the merge step that marks which of them the index holds.
// Pure C++, no Postgres headers: everything here is noexcept and allocates
// nothing, so it may run inside pg_call() between Postgres calls.
#pragma once

#include <cstddef>
#include <cstdint>

#include "limits.hpp"

namespace pg_inbox::gaps {

constexpr int kMaxWidth = 18;                       // digits; keeps numbers in int64
constexpr int64_t kMaxNumber = 999999999999999999;  // 18 nines
constexpr size_t kMaxPrefixBytes = 200;             // + 18 digits: within kMaxExternalIdBytes
constexpr int64_t kMaxWindow = 1000000;             // ids per find_gaps / scan

static_assert(kMaxPrefixBytes + kMaxWidth <= kMaxExternalIdBytes);

// "evt_{n}" or "evt_{n:8}" (zero-padded to 8 digits). Trivially destructible.
struct Pattern {
  char prefix[kMaxPrefixBytes + 1];
  size_t prefix_len;
  int width;  // at least 1: "{n}" is width 1, so 0 prints as "0"
};

// Parses text: a prefix of at most 200 bytes without braces, then {n} or
// {n:WIDTH} (1-18, no leading zero) and nothing after it. The one grammar of
// id patterns: set_id_source checks with it too (inbox._id_pattern_error).
// On failure returns false and points *why at a static reason.
bool parse_pattern(const char *text, size_t len, Pattern *out, const char **why) noexcept;

// The number of an id of the pattern: the prefix, then at least `width` and
// at most 18 digits, nothing else (the ids scan_gaps reads as numbers). False
// for any other id.
bool parse_number(const Pattern &pattern, const char *id, size_t len, int64_t *number) noexcept;

// Number of decimal digits of n >= 0.
int digit_count(int64_t n) noexcept;

// Writes prefix + n zero-padded to `length` digits and a NUL; returns the
// length written (without the NUL). cap must be at least prefix_len + 20.
size_t format_id(const Pattern &pattern, int64_t n, int length, char *out) noexcept;

// Ids of one digit length: in the index they sort as their numbers do.
// Ids of other lengths interleave with them, so each length is its own range.
struct Block {
  int64_t lo;
  int64_t hi;
  int length;
};
constexpr int kMaxBlocks = kMaxWidth + 1;

// Splits [from, to] into blocks of one digit length; returns how many.
int split_blocks(const Pattern &pattern, int64_t from, int64_t to, Block *out) noexcept;

enum class Step {
  kNext,  // go on with the next key
  kSeek,  // jump: the keys up to *seek_to (exclusive) cannot be expected ids
  kDone,  // nothing in this block is left
};

// One key of the index range of `block`, in index order. Marks its bit in
// `present` (bit i = number window_from + i) when it is an expected id.
// A longer id whose first digits are x (evt_12345 in the block of 4 digits)
// starts a run of longer ids that interleave: jump straight to x + 1.
Step visit_key(const Pattern &pattern, const Block &block, int64_t window_from, const char *key,
               size_t len, uint64_t *present, int64_t *seek_to) noexcept;

// Any key, in a read of several digit lengths at once: marks it when it is
// the id of a number of [window_from, window_to]. Returns whether it did.
bool visit_any(const Pattern &pattern, int64_t window_from, int64_t window_to, const char *key,
               size_t len, uint64_t *present) noexcept;

inline bool is_present(const uint64_t *present, int64_t bit) noexcept {
  return (present[bit >> 6] >> (bit & 63)) & 1;
}

}  // namespace pg_inbox::gaps
