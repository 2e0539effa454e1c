package interp

import "testing"

func TestNearest(t *testing.T) {
	for _, test := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"whoo", []string{"who", "what"}, "who"},
		{"Who", []string{"who"}, "who"},                            // case-insensitive
		{"brnch", []string{"repo", "branch"}, "branch"},            // one deletion
		{"x", []string{"y"}, "y"},                                  // one edit always allowed
		{"x", []string{"yz"}, ""},                                  // two edits
		{"abcdef", []string{"abcxyz"}, ""},                         // 3 > 6/3
		{"abcdef", []string{"abxdeg"}, "abxdeg"},                   // 2 ≤ 6/3
		{"timeout", []string{"timeouts", "timeout_s"}, "timeouts"}, // first of equals
		{"naïve", []string{"naive"}, "naive"},                      // runes, not bytes
		{"foo", nil, ""},
		{"", []string{"a"}, "a"},
	} {
		if got := Nearest(test.name, test.candidates); got != test.want {
			t.Errorf("Nearest(%q, %q) = %q, want %q", test.name, test.candidates, got, test.want)
		}
	}
}

func TestLevenshtein(t *testing.T) {
	for _, test := range []struct {
		x, y string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"kitten", "sitting", 3},
		{"flaw", "lawn", 2},
		{"abc", "abc", 0},
		{"日本語", "日本", 1},
	} {
		if got := levenshtein([]rune(test.x), []rune(test.y)); got != test.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", test.x, test.y, got, test.want)
		}
		if got := levenshtein([]rune(test.y), []rune(test.x)); got != test.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", test.y, test.x, got, test.want)
		}
	}
}
