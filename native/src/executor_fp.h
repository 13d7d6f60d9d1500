/* Floating point for the native loop's f32 and f16 forms: a part of
 * executor.c, included after its KINDS (the K_ names), kept apart as one
 * concept. What each lane gives is ieee.py's (fp.py's rules), bit for
 * bit; tests/model/executor/test_native_fp.py checks it. */
#ifndef IPUFS_EXECUTOR_FP_H
#define IPUFS_EXECUTOR_FP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Floating point (fp.py, ieee.py) for the f32 and f16 forms. $FP_STS's
 * flags and $FP_CTL's enables share bits INV[0] DIV0[1] OFLO[2]; $FP_CTL
 * also holds RND[18:16], ESR[19] and NANOO[20] (R
 * research/ipu1/ipu1_consts.c, CSR_W_FP_*). */
enum { FP_INV = 1 << 0, FP_DIV0 = 1 << 1, FP_OFLO = 1 << 2, FP_ENABLES = FP_INV | FP_DIV0 | FP_OFLO,
       FP_RND = 7 << 16, FP_ESR = 1 << 19, FP_NANOO = 1 << 20 };

/* An IEEE binary format as a lane holds it (ieee.py's Format). */
struct fp_format {
    uint32_t sign, infinity, quiet, largest, ones;
    int half;  /* binary16: overflow saturates, or gives NaN with NANOO (Poplar) */
};
static const struct fp_format FP32 = { 0x80000000u, 0x7F800000u, 0x00400000u, 0x7F7FFFFFu, 0xFFFFFFFFu, 0 };
static const struct fp_format FP16 = { 0x8000u, 0x7C00u, 0x0200u, 0x7BFFu, 0xFFFFu, 1 };

static inline int fp_nan(const struct fp_format *f, uint32_t bits)
{
    return (bits & (f->sign - 1)) > f->infinity;
}

/* A lane's value, exactly (a NaN: a NaN). */
static inline double fp_value(const struct fp_format *f, uint32_t bits)
{
    if (!f->half) {
        float v;
        memcpy(&v, &bits, 4);
        return v;
    }
    uint32_t exponent = bits >> 10 & 0x1F, fraction = bits & 0x3FF;
    double v = exponent == 0x1F ? (fraction ? NAN : INFINITY)
             : exponent ? ldexp((double)(fraction | 0x400), (int)exponent - 25) : ldexp((double)fraction, -24);
    return bits & 0x8000u ? -v : v;
}

/* `r` (finite) rounded to binary16, to nearest even (nearbyint under the C
 * default mode) at the quantum of its binade, subnormals included; 0 if
 * it rounds past the largest. */
static inline int f16_round(double r, uint32_t *out)
{
    double m = fabs(r);
    int e;
    frexp(m, &e);  /* m in [2**(e-1), 2**e) */
    int exponent = e - 1 < -14 ? -14 : e - 1;  /* below 2**-14 the quantum stays 2**-24 */
    uint32_t n = (uint32_t)nearbyint(ldexp(m, 10 - exponent));  /* exact scaling, one rounding */
    if (n == 2048) {  /* rounded up to the next power of two */
        n = 1024;
        exponent++;
    }
    if (exponent > 15)
        return 0;
    *out = (signbit(r) ? FP16.sign : 0) | (n < 1024 ? n : (uint32_t)(exponent + 15) << 10 | (n - 1024));
    return 1;
}

/* `r` (finite) rounded to the format; past its largest finite it
 * overflows: binary32 ±∞, binary16 the largest of its sign or, with
 * NANOO, the default NaN and INV; OFLO either way. */
static inline uint32_t fp_round(const struct fp_format *f, double r, uint32_t ctl, uint32_t *flags)
{
    uint32_t out;
    if (!f->half) {
        float v = (float)r;  /* to nearest even, subnormals included: the C default */
        memcpy(&out, &v, 4);
        if (isinf(v))
            *flags |= FP_OFLO;
        return out;
    }
    if (f16_round(r, &out))
        return out;
    *flags |= FP_OFLO;
    if (ctl & FP_NANOO) {
        *flags |= FP_INV;
        return f->infinity | f->quiet;
    }
    return (r < 0 ? f->sign : 0) | f->largest;
}

/* One lane (ieee.py's arith and compare): a NaN operand raises INV and, in
 * arithmetic, gives the first NaN operand quieted; compares are IEEE's
 * (false with a NaN, but not-equal true), all ones or zero; the rest is
 * the binary64 result of the two operands (exact for a product, correctly
 * rounded for a sum; f16 ones exact) rounded once: ∞ − ∞ and 0 × ∞ give
 * the default NaN and INV, an infinite operand an exact ∞. `flags`
 * gathers what the lane raises. 0 where Python must take the turn: a
 * finite result to round while $FP_CTL sets a rounding mode or
 * stochastic rounding (not public). */
static inline int fp_lane(const struct fp_format *f, int kind, uint32_t xb, uint32_t yb, uint32_t ctl,
                          uint32_t *flags, uint32_t *out)
{
    int nan = fp_nan(f, xb) || fp_nan(f, yb), holds;
    if (nan)
        *flags |= FP_INV;
    double x = fp_value(f, xb), y = fp_value(f, yb), r;
    switch (kind) {
    case K_CMPEQ: holds = x == y; break;
    case K_CMPNE: holds = x != y; break;
    case K_CMPLT: holds = x < y; break;
    case K_CMPLE: holds = x <= y; break;
    case K_CMPGT: holds = x > y; break;
    case K_CMPGE: holds = x >= y; break;
    case K_ADD: r = x + y; goto arithmetic;
    case K_SUB: r = x - y; goto arithmetic;
    case K_MUL: r = x * y; goto arithmetic;
    default: return 0;
    }
    *out = holds ? f->ones : 0;
    return 1;
arithmetic:
    if (nan)
        *out = (fp_nan(f, xb) ? xb : yb) | f->quiet;
    else if (isnan(r)) {
        *flags |= FP_INV;
        *out = f->infinity | f->quiet;
    } else if (isinf(r))
        *out = (r < 0 ? f->sign : 0) | f->infinity;
    else if (ctl & (FP_RND | FP_ESR))
        return 0;
    else
        *out = fp_round(f, r, ctl, flags);
    return 1;
}

#endif
