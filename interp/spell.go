package interp

import (
	"strings"
	"unicode/utf8"
)

// Nearest returns the element of candidates closest to name by
// case-insensitive edit distance, for "did you mean" hints.
// It returns "" if no candidate is within max(1, n/3) edits,
// where n is the number of characters in name.
// Among equally close candidates, the first one wins.
func Nearest(name string, candidates []string) string {
	x := []rune(strings.ToLower(name))
	limit := max(1, len(x)/3)
	best, bestD := "", limit+1
	for _, c := range candidates {
		// A length difference beyond the limit rules c out cheaply.
		if n := utf8.RuneCountInString(c); n-len(x) > limit || len(x)-n > limit {
			continue
		}
		if d := levenshtein(x, []rune(strings.ToLower(c))); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// levenshtein returns the edit distance between x and y, counting the
// swap of two adjacent characters as one edit (optimal string alignment),
// the most common typo.
func levenshtein(x, y []rune) int {
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
