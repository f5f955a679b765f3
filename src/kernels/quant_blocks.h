// ggml's quantization block layouts (byte-exact, as stored in GGUF files). Internal to kernels/.
//
// Blocks of 32 (kQk) for the legacy types; super-blocks of 256 (kQkK) for the K-quants.
// Element order inside a block follows ggml: for 4/5-bit types, byte j of `qs` holds element j
// in its low nibble and element j + 16 in its high nibble.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace reprise::kernels {

inline constexpr int kQk = 32;    // elements per legacy block
inline constexpr int kQkK = 256;  // elements per K-quant super-block
inline constexpr int kKScaleBytes = 12;

// Q4_K and Q5_K pack eight 6-bit scales and eight 6-bit mins into kKScaleBytes bytes; this
// spreads them into 16 bytes: bytes 0-7 the scales, bytes 8-15 the mins (one byte each).
inline void SpreadKScales(const uint8_t* packed, uint32_t words[4]) {
  constexpr uint32_t kLow6 = 0x3F3F3F3Fu, kLow4 = 0x0F0F0F0Fu, kLow2 = 0x03030303u;
  std::memcpy(words, packed, kKScaleBytes);
  words[3] = ((words[2] >> 4) & kLow4) | (((words[1] >> 6) & kLow2) << 4);
  const uint32_t low_mins = words[1] & kLow6;
  words[1] = (words[2] & kLow4) | (((words[0] >> 6) & kLow2) << 4);
  words[2] = low_mins;
  words[0] &= kLow6;
}

// w = d * (q - 8), q in [0, 15]
struct BlockQ4_0 {
  uint16_t d;  // f16
  uint8_t qs[kQk / 2];
};
// w = d * q + m, q in [0, 15]
struct BlockQ4_1 {
  uint16_t d;  // f16
  uint16_t m;  // f16
  uint8_t qs[kQk / 2];
};
// w = d * (q - 16), q in [0, 31]; bit j of qh (little endian u32) is bit 4 of element j
struct BlockQ5_0 {
  uint16_t d;  // f16
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};
// w = d * q + m, q in [0, 31]
struct BlockQ5_1 {
  uint16_t d;  // f16
  uint16_t m;  // f16
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};
// w = d * q, q in [-128, 127]
struct BlockQ8_0 {
  uint16_t d;  // f16
  int8_t qs[kQk];
};
// 8 sub-blocks of 32, each with a 6-bit scale sc and min m (packed in `scales`, see
// GetScaleMinK4): w = d * sc * q - dmin * m, q in [0, 15]. Sub-blocks 2i and 2i + 1 share the
// 32 bytes qs[32 i .. 32 i + 31]: low nibbles then high nibbles.
struct BlockQ4_K {
  uint16_t d;     // f16
  uint16_t dmin;  // f16
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQkK / 2];
};
// As Q4_K with a fifth bit: bit (2i) of qh[l] is bit 4 of element l of sub-block 2i, bit (2i + 1)
// that of element l of sub-block 2i + 1.
struct BlockQ5_K {
  uint16_t d;     // f16
  uint16_t dmin;  // f16
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQkK / 8];
  uint8_t qs[kQkK / 2];
};
// 16 sub-blocks of 16 with int8 scales: w = d * scales[e / 16] * (q - 32), q in [0, 63].
// Each half of 128 elements uses 64 bytes of ql and 32 of qh:
//   element l      : ql[l] low nibble,      qh[l] bits 0-1      (l < 32)
//   element l + 32 : ql[l + 32] low nibble, qh[l] bits 2-3
//   element l + 64 : ql[l] high nibble,     qh[l] bits 4-5
//   element l + 96 : ql[l + 32] high nibble, qh[l] bits 6-7
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];
  uint8_t qh[kQkK / 4];
  int8_t scales[kQkK / 16];
  uint16_t d;  // f16
};

// A Q6_K super-block's 256 codes (0-63, element order) from its ql and qh as laid out above,
// and back (every bit of ql and qh written).
inline void ReadQ6KCodes(const uint8_t* ql, const uint8_t* qh, uint8_t* codes) {
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32, codes += 128) {
    for (int l = 0; l < 32; ++l) {
      codes[l] = static_cast<uint8_t>((ql[l] & 0xF) | ((qh[l] & 3) << 4));
      codes[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      codes[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      codes[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
}

inline void WriteQ6KCodes(const uint8_t* codes, uint8_t* ql, uint8_t* qh) {
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32, codes += 128) {
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((codes[l] & 0xF) | ((codes[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((codes[l + 32] & 0xF) | ((codes[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((codes[l] >> 4) | ((codes[l + 32] >> 4) << 2) |
                                   ((codes[l + 64] >> 4) << 4) | ((codes[l + 96] >> 4) << 6));
    }
  }
}

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block.
inline void GetScaleMinK4(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

}  // namespace reprise::kernels
