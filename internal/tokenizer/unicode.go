package tokenizer

import "unicode"

// Character classes used by the pre-tokenizer scanners. They follow the
// regex classes of the original tokenizers: \p{L}, \p{N}, \p{P}, \p{S},
// \p{M} are Unicode general categories and \s is the Unicode White_Space
// property (what Oniguruma and Rust's regex use).

const (
	clsL = 1 << iota
	clsN
	clsWS
	clsP
	clsS
	clsM
	clsLu // \p{Lu} | \p{Lt}
	clsLl
)

// asciiCls caches the classes of ASCII characters: most input is ASCII and
// the unicode package's range tables cost a binary search each.
var asciiCls [128]uint8

func init() {
	for r := rune(0); r < 128; r++ {
		asciiCls[r] = slowCls(r)
	}
}

func slowCls(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= clsL
		if unicode.Is(unicode.Lu, r) || unicode.Is(unicode.Lt, r) {
			c |= clsLu
		}
		if unicode.Is(unicode.Ll, r) {
			c |= clsLl
		}
	}
	if unicode.IsNumber(r) {
		c |= clsN
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= clsWS
	}
	if unicode.IsPunct(r) {
		c |= clsP
	}
	if unicode.IsSymbol(r) {
		c |= clsS
	}
	if unicode.IsMark(r) {
		c |= clsM
	}
	return c
}

func cls(r rune) uint8 {
	if r >= 0 && r < 128 {
		return asciiCls[r]
	}
	return slowCls(r)
}

func isL(r rune) bool {
	if r < 128 {
		return asciiCls[r]&clsL != 0
	}
	return unicode.IsLetter(r)
}

func isN(r rune) bool {
	if r < 128 {
		return asciiCls[r]&clsN != 0
	}
	return unicode.IsNumber(r)
}

func isWS(r rune) bool {
	if r < 128 {
		return asciiCls[r]&clsWS != 0
	}
	return unicode.Is(unicode.White_Space, r)
}

func isP(r rune) bool {
	if r < 128 {
		return asciiCls[r]&clsP != 0
	}
	return unicode.IsPunct(r)
}

func isNL(r rune) bool { return r == '\r' || r == '\n' }

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool {
	if r < 128 {
		return asciiCls[r]&(clsL|clsN|clsWS) == 0
	}
	return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.Is(unicode.White_Space, r)
}

// isOtherM is [^\s\p{L}\p{M}\p{N}].
func isOtherM(r rune) bool { return isOther(r) && (r < 128 || !unicode.IsMark(r)) }

// isLM is [\p{L}\p{M}].
func isLM(r rune) bool { return isL(r) || (r >= 128 && unicode.IsMark(r)) }

// isWordPrefix is [^\r\n\p{L}\p{N}].
func isWordPrefix(r rune) bool { return r != '\r' && r != '\n' && !isL(r) && !isN(r) }

// isUpperish is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}].
func isUpperish(r rune) bool {
	c := cls(r)
	if c&clsM != 0 {
		return true
	}
	return c&clsL != 0 && c&clsLl == 0
}

// isLowerish is [\p{Ll}\p{Lm}\p{Lo}\p{M}].
func isLowerish(r rune) bool {
	c := cls(r)
	if c&clsM != 0 {
		return true
	}
	return c&clsL != 0 && c&clsLu == 0
}

// runeRanges is a sorted list of inclusive code point ranges.
type runeRanges [][2]rune

func (rs runeRanges) has(r rune) bool {
	lo, hi := 0, len(rs)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case r < rs[m][0]:
			hi = m
		case r > rs[m][1]:
			lo = m + 1
		default:
			return true
		}
	}
	return false
}
