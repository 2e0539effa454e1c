package termmd

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// A part of a text: a table, or text between tables.
type part struct {
	text  string
	table *table
}

type table struct {
	align []byte     // per column: 'l', 'r' or 'c'
	rows  [][]string // the header, then the body; cells as written
}

// splitTables finds the GFM tables that start a block of src (after a
// blank line, outside fenced code): a row, a delimiter row with as many
// cells, then rows (a line without a pipe too) until a blank line.
func splitTables(src string) []part {
	lines := strings.SplitAfter(src, "\n")
	var parts []part
	start, fenced, blank := 0, false, true
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
		}
		if !fenced && blank && i+1 < len(lines) {
			if tb, n := parseTable(lines[i:]); tb != nil {
				if i > start {
					parts = append(parts, part{text: strings.Join(lines[start:i], "")})
				}
				parts = append(parts, part{table: tb})
				i += n - 1
				start, blank = i+1, false
				continue
			}
		}
		blank = t == ""
	}
	if start < len(lines) {
		parts = append(parts, part{text: strings.Join(lines[start:], "")})
	}
	return parts
}

// parseTable reads a table at the start of lines, and how many lines it
// takes, or nil.
func parseTable(lines []string) (*table, int) {
	if !strings.Contains(lines[0], "|") || !strings.Contains(lines[1], "|") {
		return nil, 0
	}
	head := cells(lines[0])
	delim := cells(lines[1])
	if head == nil || len(head) != len(delim) {
		return nil, 0
	}
	tb := &table{align: make([]byte, len(delim)), rows: [][]string{head}}
	for i, d := range delim {
		core := strings.Trim(d, ":")
		if core == "" || strings.Trim(core, "-") != "" {
			return nil, 0
		}
		switch left, right := strings.HasPrefix(d, ":"), strings.HasSuffix(d, ":"); {
		case left && right:
			tb.align[i] = 'c'
		case right:
			tb.align[i] = 'r'
		default:
			tb.align[i] = 'l'
		}
	}
	n := 2
	for ; n < len(lines); n++ {
		row := cells(lines[n])
		if row == nil {
			break
		}
		tb.rows = append(tb.rows, row)
	}
	return tb, n
}

// cells splits a row at the pipes that are not escaped (in code spans too,
// as GFM does), without the outer ones; nil if the line is blank.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil
	}
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !strings.HasSuffix(line, `\|`) {
		line = line[:len(line)-1]
	}
	var out []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case c == '|':
			out = append(out, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(c)
		}
	}
	return append(out, strings.TrimSpace(cell.String()))
}

// table renders a table with its columns padded and aligned; a row with
// fewer cells than the header is filled, one with more is cut.
func (r *Renderer) table(tb *table) []string {
	rows := make([][]string, len(tb.rows))
	widths := make([]int, len(tb.align))
	for i, row := range tb.rows {
		rows[i] = make([]string, len(widths))
		for j := range widths {
			if j >= len(row) {
				continue
			}
			s := r.cell(row[j])
			if i == 0 && r.Style != (Style{}) {
				s = "\x1b[1m" + s + "\x1b[22m"
			}
			rows[i][j] = s
			widths[j] = max(widths[j], ansi.StringWidth(s))
		}
	}
	bar := paint(r.Style.TableRule, " │ ")
	var out []string
	for i, row := range rows {
		for j, c := range row {
			row[j] = pad(c, widths[j], tb.align[j])
		}
		out = append(out, strings.TrimRight(strings.Join(row, bar), " "))
		if i == 0 {
			rule := make([]string, len(widths))
			for j, n := range widths {
				rule[j] = strings.Repeat("─", n)
			}
			out = append(out, paint(r.Style.TableRule, strings.Join(rule, "─┼─")))
		}
	}
	return out
}

func pad(s string, width int, align byte) string {
	n := width - ansi.StringWidth(s)
	switch align {
	case 'r':
		return strings.Repeat(" ", n) + s
	case 'c':
		return strings.Repeat(" ", n/2) + s + strings.Repeat(" ", n-n/2)
	}
	return s + strings.Repeat(" ", n)
}
