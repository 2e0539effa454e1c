// Package safename tells whether a string is safe as a file name of its
// own: plug ids, session ids and the demo agent's session ids name files.
package safename

// Valid tells whether s is 1 to 128 letters, digits, '.', '_' or '-',
// starting with a letter or digit. (A loop, not a regular expression: the
// expression's 128 repeats, compiled at start, cost every process of the
// binary a third of a millisecond.)
func Valid(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}
