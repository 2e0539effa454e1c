package main

// What a mistaken command line is told: the error, the names it may have
// meant, and where the help is, not the whole help (as go, gh and kubectl
// do). Bare blaise-agent gets a summary of the commands.

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/alecthomas/kong"
)

// unknownWord matches kong's errors about a word it does not know, less
// the suggestions it adds, which are ranked in no order.
var unknownWord = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(unknown flag|unexpected argument) (\S+?)(?:, did you mean .*)?$`)
})

// usageError writes what was wrong with the command line and the command
// whose --help says more.
func usageError(w io.Writer, err *kong.ParseError) {
	msg := err.Error()
	at := deepestCommand(err.Context)
	if m := unknownWord().FindStringSubmatch(msg); m != nil {
		msg = m[1] + " " + m[2]
		if m[1] == "unknown flag" {
			if near := nearest(m[2], flagNames(err.Context)); len(near) > 0 {
				msg += "; did you mean " + strings.Join(near, " or ") + "?"
			}
		} else if parent := withCommands(at); parent != nil {
			if near := nearest(m[2], commandNames(parent)); len(near) > 0 {
				at = parent
				for i, n := range near {
					near[i] = strconv.Quote(n)
				}
				msg = fmt.Sprintf("unknown command %q for %q; did you mean %s?", m[2], commandPath(at), strings.Join(near, " or "))
			}
		}
	}
	fmt.Fprintf(w, "blaise-agent: %s\n", msg)
	fmt.Fprintf(w, "Run '%s --help' for usage.\n", commandPath(at))
}

// deepestCommand is the last command the command line chose, else the
// application.
func deepestCommand(kctx *kong.Context) *kong.Node {
	if kctx == nil || len(kctx.Path) == 0 {
		return nil
	}
	node := kctx.Path[0].Node()
	for _, p := range kctx.Path {
		if p.Command != nil {
			node = p.Command
		}
	}
	return node
}

// withCommands is node, or the command it is the default of, when it has
// commands under it: a word mistaken for one of them lands in the default
// command (sessions lst is sessions list lst).
func withCommands(node *kong.Node) *kong.Node {
	for ; node != nil; node = node.Parent {
		if len(commandNames(node)) > 0 {
			return node
		}
		if node.Parent == nil || node.Parent.DefaultCmd != node {
			return nil
		}
	}
	return nil
}

// commandPath is "blaise-agent" and the names of the commands to node.
func commandPath(node *kong.Node) string {
	var names []string
	for ; node != nil; node = node.Parent {
		if node.Type == kong.CommandNode {
			names = append([]string{node.Name}, names...)
		}
	}
	return strings.Join(append([]string{"blaise-agent"}, names...), " ")
}

// commandNames are the visible commands under node.
func commandNames(node *kong.Node) []string {
	var names []string
	for _, c := range node.Children {
		if c.Type == kong.CommandNode && !c.Hidden {
			names = append(names, c.Name)
			names = append(names, c.Aliases...)
		}
	}
	return names
}

// flagNames are the visible long flags the command line could take where
// it went wrong.
func flagNames(kctx *kong.Context) []string {
	var names []string
	for _, f := range kctx.Flags() {
		if !f.Hidden {
			names = append(names, "--"+f.Name)
		}
	}
	return names
}

// nearest returns the candidates closest to word: those it begins, or a
// few edits away, the fewest edits first and only those.
func nearest(word string, candidates []string) []string {
	best, near := -1, []string(nil)
	for _, c := range candidates {
		d := editDistance(word, c)
		if strings.HasPrefix(c, word) {
			d = 0
		}
		switch {
		case d > 2 || (best >= 0 && d > best) || slices.Contains(near, c):
		case d == best:
			near = append(near, c)
		default:
			best, near = d, []string{c}
		}
	}
	return near
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		prev := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			prev, row[j] = row[j], min(row[j]+1, row[j-1]+1, prev+cost)
		}
	}
	return row[len(b)]
}

// summary writes the commands, one line each, for blaise-agent without
// one: the first clause of each command's help.
func summary(w io.Writer, app *kong.Application) {
	fmt.Fprintf(w, "%s\n\nUsage: blaise-agent <command> [flags]\n\nCommands:\n", app.Help)
	for _, c := range app.Children {
		if c.Type == kong.CommandNode && !c.Hidden {
			fmt.Fprintf(w, "  %-12s %s\n", c.Name, firstClause(c.Help))
		}
	}
	fmt.Fprintln(w, "\nRun 'blaise-agent <command> --help' for a command's flags, 'blaise-agent --help' for all of them.")
}

// firstClause is help up to its first colon, semicolon, parenthesis or
// full stop.
func firstClause(help string) string {
	for _, end := range []string{":", ";", " (", ". "} {
		if i := strings.Index(help, end); i >= 0 {
			help = help[:i]
		}
	}
	return strings.TrimSuffix(help, ".")
}
