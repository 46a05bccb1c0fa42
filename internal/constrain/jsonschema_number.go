package constrain

// Numbers of JSON schemas: integers and numbers, with bounds written as
// digit-range grammars (exact for integers; numbers are scaled to at most
// 3 decimals, see the top of jsonschema.go).

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
)

const (
	jsIntDigits  = 15 // digits of an integer part
	jsFracDigits = 15 // digits of a fraction
	jsExpDigits  = 3  // digits of an exponent
	jsMaxScale   = 3  // decimals of number bounds
)

// upTo is 0 to k digits.
func (c *jsc) upTo(k int) int {
	return c.named(fmt.Sprintf("digits<=%d", k), func(r int) {
		if k > 0 {
			c.alt(r, Bytes(Range('0', '9')), Ref(c.upTo(k-1)))
		}
		c.alt(r)
	})
}

// uint is an integer without sign: '0' | [1-9] digit{0,14}.
func (c *jsc) uint() int {
	return c.named("uint", func(r int) {
		c.alt(r, Bytes(Byte('0')))
		c.alt(r, Bytes(Range('1', '9')), Ref(c.upTo(jsIntDigits-1)))
	})
}

// anyInteger is '-'? uint.
func (c *jsc) anyInteger() int {
	return c.named("integer", func(r int) {
		c.alt(r, Bytes(Byte('-')), Ref(c.uint()))
		c.alt(r, Ref(c.uint()))
	})
}

// anyNumber is '-'? uint frac? exp?.
func (c *jsc) anyNumber() int {
	return c.named("number", func(r int) {
		frac := c.named("frac", func(f int) {
			c.alt(f, Bytes(Byte('.')), Bytes(Range('0', '9')), Ref(c.upTo(jsFracDigits-1)))
			c.alt(f)
		})
		exp := c.named("exp", func(e int) {
			var eE, sign ByteSet
			eE.Add('e')
			eE.Add('E')
			sign.Add('+')
			sign.Add('-')
			c.alt(e, Bytes(eE), Bytes(sign), Bytes(Range('0', '9')), Ref(c.upTo(jsExpDigits-1)))
			c.alt(e, Bytes(eE), Bytes(Range('0', '9')), Ref(c.upTo(jsExpDigits-1)))
			c.alt(e)
		})
		u := c.named("unumber", func(u int) { c.alt(u, Ref(c.uint()), Ref(frac), Ref(exp)) })
		c.alt(r, Bytes(Byte('-')), Ref(u))
		c.alt(r, Ref(u))
	})
}

// bound reads a numeric keyword.
func (c *jsc) bound(s *jval, kw, path string) *big.Rat {
	v := s.get(kw)
	if v == nil {
		return nil
	}
	r := jsRat(v)
	if r == nil {
		c.fail(kw, path, "must be a number")
	}
	return r
}

// scaledBounds is the range [lo, hi] of N = x·10^scale for the x the
// bounds of s allow, rounded inwards (nil: no bound on that side).
func (c *jsc) scaledBounds(s *jval, path string, scale int) (lo, hi *big.Int) {
	mul := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	at := func(kw string, exclusive, upper bool) *big.Int {
		r := c.bound(s, kw, path)
		if r == nil {
			return nil
		}
		r = new(big.Rat).Mul(r, mul)
		n := new(big.Int).Quo(r.Num(), r.Denom()) // truncated toward zero
		exact := r.IsInt()
		if upper {
			// floor, or for exclusive the largest integer < r
			if r.Sign() < 0 && !exact {
				n.Sub(n, big.NewInt(1))
			}
			if exclusive && exact {
				n.Sub(n, big.NewInt(1))
			}
		} else {
			// ceil, or for exclusive the smallest integer > r
			if r.Sign() > 0 && !exact {
				n.Add(n, big.NewInt(1))
			}
			if exclusive && exact {
				n.Add(n, big.NewInt(1))
			}
		}
		return n
	}
	tighter := func(a, b *big.Int, upper bool) *big.Int {
		switch {
		case a == nil:
			return b
		case b == nil:
			return a
		case (a.Cmp(b) < 0) == upper:
			return a
		}
		return b
	}
	lo = tighter(at("minimum", false, false), at("exclusiveMinimum", true, false), false)
	hi = tighter(at("maximum", false, true), at("exclusiveMaximum", true, true), true)
	return lo, hi
}

// decimals is the number of decimals r needs (up to limit+1).
func jsDecimals(r *big.Rat, limit int) int {
	x := new(big.Rat).Set(r)
	ten := big.NewRat(10, 1)
	for k := 0; k <= limit; k++ {
		if x.IsInt() {
			return k
		}
		x.Mul(x, ten)
	}
	return limit + 1
}

func jsHasBounds(s *jval) bool {
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if s.get(k) != nil {
			return true
		}
	}
	return false
}

// integer compiles an integer with its bounds, exactly (within 15 digits).
func (c *jsc) integer(s *jval, path string) int {
	if !jsHasBounds(s) {
		return c.anyInteger()
	}
	lo, hi := c.scaledBounds(s, path, 0)
	return c.signed(lo, hi, 0, false, path)
}

// number compiles a number with its bounds.
func (c *jsc) number(s *jval, path string) int {
	if !jsHasBounds(s) {
		return c.anyNumber()
	}
	scale, exclusive := 0, false
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if r := c.bound(s, k, path); r != nil {
			scale = max(scale, jsDecimals(r, jsMaxScale))
			exclusive = exclusive || strings.HasPrefix(k, "exclusive")
		}
	}
	if exclusive {
		scale++
	}
	scale = min(scale, jsMaxScale)
	lo, hi := c.scaledBounds(s, path, scale)
	return c.signed(lo, hi, scale, true, path)
}

// signed is the texts of N/10^scale for N in [lo, hi] (nil: unbounded,
// that is up to 15 integer digits), written with exactly scale decimals;
// with tail (numbers), every N < hi may be followed by more decimals.
func (c *jsc) signed(lo, hi *big.Int, scale int, tail bool, path string) int {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(jsIntDigits+scale)), nil)
	limit.Sub(limit, big.NewInt(1))
	neg := new(big.Int).Neg(limit)
	if lo == nil || lo.Cmp(neg) < 0 {
		lo = neg
	}
	if hi == nil || hi.Cmp(limit) > 0 {
		hi = limit
	}
	if lo.Cmp(limit) > 0 {
		c.fail("minimum", path, "beyond the supported range (%d integer digits)", jsIntDigits)
	}
	if hi.Cmp(neg) < 0 {
		c.fail("maximum", path, "beyond the supported range (%d integer digits)", jsIntDigits)
	}
	if lo.Cmp(hi) > 0 {
		return -1
	}
	r := c.fresh("num")
	// x ≥ 0: N in [max(lo, 0), hi].
	if hi.Sign() >= 0 {
		a := new(big.Int)
		if lo.Sign() > 0 {
			a.Set(lo)
		}
		c.alt(r, Ref(c.magnitude(a, hi, scale, tail)))
	}
	// x < 0: '-' then N in [max(-hi, 0), -lo].
	if lo.Sign() < 0 {
		a := new(big.Int)
		if hi.Sign() < 0 {
			a.Neg(hi)
		}
		c.alt(r, Bytes(Byte('-')), Ref(c.magnitude(a, new(big.Int).Neg(lo), scale, tail)))
	}
	return r
}

// magnitude is the texts of the magnitudes from a to b (scaled N, a ≥ 0):
// with tail, N in [a, b-1] then optional decimals, or N = b, or (scale >
// 0) N in [a, b] written with some of its trailing zero decimals left out
// ("2.5" or "2" rather than "2.50" or "2.00"). The three are disjoint.
func (c *jsc) magnitude(a, b *big.Int, scale int, tail bool) int {
	if !tail {
		return c.nrange(a, b, scale, false)
	}
	r := c.fresh("mag")
	if a.Cmp(b) < 0 {
		c.alt(r, Ref(c.nrange(a, new(big.Int).Sub(b, big.NewInt(1)), scale, false)), Ref(c.tail(scale)))
	}
	c.alt(r, Ref(c.nrange(b, b, scale, false)))
	if scale > 0 {
		c.alt(r, Ref(c.nrange(a, b, scale, true)))
	}
	return r
}

// tail is the optional decimals after a scaled N.
func (c *jsc) tail(scale int) int {
	return c.named(fmt.Sprintf("tail%d", scale), func(r int) {
		if scale == 0 {
			c.alt(r, Bytes(Byte('.')), Bytes(Range('0', '9')), Ref(c.upTo(jsFracDigits-1)))
			c.alt(r)
			return
		}
		c.alt(r, Ref(c.upTo(jsFracDigits-scale)))
	})
}

// nrange is the texts of N in [a, b] (0 ≤ a ≤ b) with a '.' before the
// last scale digits: N is written with at least scale+1 digits, without
// leading zeros beyond those. With short, only the texts that leave out
// one or more trailing zero decimals (and the '.' when all go).
func (c *jsc) nrange(a, b *big.Int, scale int, short bool) int {
	key := fmt.Sprintf("n|%s|%s|%d|%t", a, b, scale, short)
	if r, ok := c.digits[key]; ok {
		return r
	}
	r := c.fresh("nrange")
	c.digits[key] = r
	la := max(len(a.String()), scale+1)
	lb := max(len(b.String()), scale+1)
	pow := func(k int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil) }
	pad := func(x *big.Int, k int) string {
		s := x.String()
		return strings.Repeat("0", k-len(s)) + s
	}
	for k := la; k <= lb; k++ {
		glo, ghi := a, b
		if k > la {
			glo = pow(k - 1)
		}
		if k < lb {
			ghi = new(big.Int).Sub(pow(k), big.NewInt(1))
		}
		dot := -1
		if scale > 0 {
			dot = k - scale
		}
		c.alt(r, Ref(c.digitRange(pad(glo, k), pad(ghi, k), dot, short)))
	}
	return r
}

// digitRange is the digit strings of len(lo) between lo and hi (of equal
// length), with a '.' before the digit at index dot (none if dot < 0 at
// the start). With short, the strings stop early, after the '.' or before
// it, where all the digits left out are zeros (at least one).
func (c *jsc) digitRange(lo, hi string, dot int, short bool) int {
	key := fmt.Sprintf("%s|%s|%d|%t", lo, hi, dot, short)
	if r, ok := c.digits[key]; ok {
		return r
	}
	r := c.fresh("digits")
	c.digits[key] = r
	if lo == "" {
		if !short {
			c.alt(r)
		}
		return r // short: nothing was left out, no alternative
	}
	if short && dot <= 0 && strings.Trim(lo, "0") == "" {
		c.alt(r) // stop: the rest would be zeros, which lo allows
	}
	var pre []Elem
	if dot == 0 {
		pre = Literal(".")
	}
	l0, h0 := lo[0], hi[0]
	restLo, restHi := lo[1:], hi[1:]
	zeros, nines := strings.Repeat("0", len(restLo)), strings.Repeat("9", len(restLo))
	seq := func(set ByteSet, a, b string) {
		c.alt(r, append(slices.Clone(pre), Bytes(set), Ref(c.digitRange(a, b, dot-1, short)))...)
	}
	switch {
	case l0 == h0:
		seq(Byte(l0), restLo, restHi)
	case restLo == zeros && restHi == nines:
		seq(Range(l0, h0), zeros, nines)
	default:
		seq(Byte(l0), restLo, nines)
		if l0+1 < h0 {
			seq(Range(l0+1, h0-1), zeros, nines)
		}
		seq(Byte(h0), zeros, restHi)
	}
	return r
}
