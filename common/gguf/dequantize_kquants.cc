// K-quant super-block decoders (256 elements per block). Layouts from ggml-common.h; the float
// operations follow ggml's dequantize_row_q*_K in the same order, so results are bit-identical.
//   Q2_K {scales[16], qs[64], d, dmin}                  84 bytes
//   Q3_K {hmask[32], qs[64], scales[12], d}            110 bytes
//   Q4_K {d, dmin, scales[12], qs[128]}                144 bytes
//   Q5_K {d, dmin, scales[12], qh[32], qs[128]}        176 bytes
//   Q6_K {ql[128], qh[64], scales[16] int8, d}         210 bytes
//   Q8_K {d (f32), qs[256] int8, bsums[16] int16}      292 bytes
#include <cstdint>

#include "common/gguf/block_codec.h"

namespace tessera::gguf::internal {
namespace {

// Q4_K/Q5_K pack 8 six-bit scales and 8 six-bit mins into 12 bytes: sub-blocks 0..3 use the low 6
// bits of bytes 0..3 (scales) and 4..7 (mins); sub-blocks 4..7 take their low 4 bits from the
// nibbles of bytes 8..11 and their top 2 bits from the spare top bits of bytes 0..7.
void ScaleMinK4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K packs 16 six-bit scales (biased by 32) into 12 bytes: the low nibbles live in bytes 0..7
// (low nibble for scales 0..7, high nibble for 8..15), the top 2 bits in bytes 8..11.
int ScaleQ3K(int j, const uint8_t* s) {
  const int low = j < 8 ? (s[j] & 0x0F) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace

void DecodeQ2_K(const uint8_t* block, float* out) {
  const uint8_t* scales = block;
  const uint8_t* q = block + 16;
  const float d = LoadHalf(block + 80);
  const float dmin = LoadHalf(block + 82);
  int is = 0;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {  // two groups of 16 with their own scale
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0x0F);
        const float ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          *out++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void DecodeQ3_K(const uint8_t* block, float* out) {
  const uint8_t* hmask = block;
  const uint8_t* q = block + 32;
  const uint8_t* scales = block + 96;
  const float d_all = LoadHalf(block + 108);
  int is = 0;
  uint8_t m = 1;  // hmask bit for the current group of 32 elements
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
      for (int part = 0; part < 2; ++part) {
        const float dl = d_all * static_cast<float>(ScaleQ3K(is++, scales));
        for (int l = 0; l < 16; ++l) {
          const int i = l + 16 * part;
          // A clear high bit means the 2-bit code is offset by -4.
          const int code = ((q[i] >> shift) & 3) - ((hmask[i] & m) ? 0 : 4);
          *out++ = dl * static_cast<float>(code);
        }
      }
    }
  }
}

void DecodeQ4_K(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float dmin = LoadHalf(block + 2);
  const uint8_t* scales = block + 4;
  const uint8_t* q = block + 16;
  for (int j = 0; j < 8; j += 2, q += 32) {  // 64 elements: low nibbles, then high nibbles
    uint8_t sc, mn;
    ScaleMinK4(j, scales, &sc, &mn);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(mn);
    ScaleMinK4(j + 1, scales, &sc, &mn);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) *out++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
    for (int l = 0; l < 32; ++l) *out++ = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}

void DecodeQ5_K(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float dmin = LoadHalf(block + 2);
  const uint8_t* scales = block + 4;
  const uint8_t* qh = block + 16;
  const uint8_t* ql = block + 48;
  uint8_t u1 = 1, u2 = 2;  // qh bits holding the fifth bit of the two 32-element groups
  for (int j = 0; j < 8; j += 2, ql += 32) {
    uint8_t sc, mn;
    ScaleMinK4(j, scales, &sc, &mn);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(mn);
    ScaleMinK4(j + 1, scales, &sc, &mn);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) {
      *out++ = d1 * static_cast<float>((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      *out++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

void DecodeQ6_K(const uint8_t* block, float* out) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(block + 192);
  const float d = LoadHalf(block + 208);
  // Each 128-element half: element l+32*k takes 4 low bits from ql (low nibble for k=0,1, high
  // nibble for k=2,3) and 2 high bits from qh[l] bits 2k..2k+1; codes are biased by 32.
  for (int half = 0; half < 2; ++half, out += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

void DecodeQ8_K(const uint8_t* block, float* out) {
  const float d = LoadF32(block);  // Q8_K's scale is a full f32, unlike the other formats
  for (int j = 0; j < 256; ++j) {
    out[j] = d * static_cast<float>(static_cast<int8_t>(block[4 + j]));
  }
}

}  // namespace tessera::gguf::internal
