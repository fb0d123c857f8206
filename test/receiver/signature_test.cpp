// HMAC, encodings and the constant-time compare, with published vectors.
#include <gtest/gtest.h>

#include "intake/signature.h"

using namespace inbox;

TEST(Signature, HexRoundTripAndRejects) {
  EXPECT_EQ(hex_encode("\x01\xab\xff"), "01abff");
  EXPECT_EQ(*hex_decode("01ABff"), std::string("\x01\xab\xff"));
  EXPECT_FALSE(hex_decode("abc"));  // odd length
  EXPECT_FALSE(hex_decode("zz"));
}

TEST(Signature, Base64RoundTripAndRejects) {
  for (std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"})
    EXPECT_EQ(*base64_decode(base64_encode(s)), s);
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(*base64_decode("Zm9vYg=="), "foob");
  EXPECT_FALSE(base64_decode("Zm9vYg="));    // bad length
  EXPECT_FALSE(base64_decode("Zm9v Yg=="));  // whitespace inside
  EXPECT_FALSE(base64_decode("Zm9*"));
}

// RFC 4231 test case 2.
TEST(Signature, HmacSha256Rfc4231) {
  EXPECT_EQ(hex_encode(hmac(HmacAlgorithm::sha256, "Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex_encode(hmac(HmacAlgorithm::sha512, "Jefe", "what do ya want for nothing?")),
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737");
  // RFC 2202 test case 2 (HMAC-SHA1).
  EXPECT_EQ(hex_encode(hmac(HmacAlgorithm::sha1, "Jefe", "what do ya want for nothing?")),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
}

// The example in GitHub's "Validating webhook deliveries" docs.
TEST(Signature, GitHubPublishedVector) {
  EXPECT_EQ("sha256=" + hex_encode(hmac(HmacAlgorithm::sha256, "It's a Secret to Everybody",
                                        "Hello, World!")),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
}

TEST(Signature, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("", ""));  // an empty MAC never matches
}
