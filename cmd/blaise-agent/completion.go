package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"
	kongcompletion "github.com/jotaen/kong-completion"
	"github.com/posener/complete"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/stdlib"
)

// CompletionCmd is `blaise-agent completion SHELL`.
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"The shell: bash, zsh or fish."`
}

// Help says how to use the script.
func (c *CompletionCmd) Help() string {
	return `Load it in the shell's startup file:

  bash (~/.bashrc):                   source <(blaise-agent completion bash)
  zsh (~/.zshrc):                     source <(blaise-agent completion zsh)
  fish (~/.config/fish/config.fish):  blaise-agent completion fish | source

The shell then asks blaise-agent itself what completes a word: commands, flags,
session ids (from the state directory of --state-dir, $BLAISE_STATE_DIR or the
default one), the actions of a session after sessions do ID (with --server or
$BLAISE_SERVER, asked of the server) and blaise: references.`
}

// zshCompinit starts zsh's completion system when the startup file has
// not: the script's bashcompinit needs its compdef.
const zshCompinit = "(( $+functions[compdef] )) || { autoload -Uz compinit && compinit; }\n"

// Run prints the script.
func (c *CompletionCmd) Run(kctx *kong.Context) error {
	if c.Shell == "zsh" {
		fmt.Fprint(kctx.Stdout, zshCompinit)
	}
	return (&kongcompletion.Completion{Shell: c.Shell, Code: true}).Run(kctx)
}

// completeWords answers the shell when it runs blaise-agent to complete a word
// (it sets COMP_LINE), and exits; otherwise it returns.
func completeWords(parser *kong.Kong) {
	if line := os.Getenv("COMP_LINE"); line != "" && len(os.Args) > 2 {
		parser.Stdout = &wordbreakWriter{w: parser.Stdout, cut: wordbreakPrefix(line, os.Getenv("COMP_POINT"), os.Args[2])}
	}
	kongcompletion.Register(parser,
		kongcompletion.WithPredictor("session", complete.PredictFunc(predictSessions)),
		kongcompletion.WithPredictor("action", complete.PredictFunc(predictActions)),
		kongcompletion.WithPredictor("ref", complete.PredictOr(complete.PredictFunc(predictStdlib), complete.PredictFiles("*.star"))),
		kongcompletion.WithPredictor("star", complete.PredictFiles("*.star")),
	)
}

// predictSessions lists the sessions that are not ended, from the state
// directory the command line names, else the one run would use.
func predictSessions(a complete.Args) []string {
	st := completionStore(a)
	if st == nil {
		return nil
	}
	recs, _ := st.Sessions(context.Background())
	var ids []string
	for _, r := range recs {
		if r.State != lifecycle.Ended {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// completionStore is the store of the state directory the command line
// names, else the one run would use; nil when there is none.
func completionStore(a complete.Args) *filestore.Store {
	dir := os.Getenv("BLAISE_STATE_DIR")
	for i, w := range a.All {
		if v, ok := strings.CutPrefix(w, "--state-dir="); ok {
			dir = v
		} else if w == "--state-dir" && i+1 < len(a.All) {
			dir = a.All[i+1]
		}
	}
	if dir == "" {
		dir = filestore.DefaultStateDir()
	}
	if ok, err := filestore.StoreExists(dir); err != nil || !ok {
		return nil // completing must not create a state directory
	}
	st, err := filestore.OpenStore(dir)
	if err != nil {
		return nil
	}
	return st
}

// predictStdlib lists the plugs of the standard library as blaise:NAME.
func predictStdlib(complete.Args) []string {
	names, _ := fs.Glob(stdlib.FS, "*.star")
	for i, n := range names {
		names[i] = "blaise:" + strings.TrimSuffix(n, ".star")
	}
	return names
}

// wordbreakPrefix is what to cut from the start of each completion for
// bash: it splits words at ':' too (COMP_WORDBREAKS), passes blaise-agent
// only the part after it (word, in its second argument, when it runs it
// with -C), and replaces only that part, so that "blaise:sh" completed as
// "blaise:shell" would become "blaise:blaise:shell".
func wordbreakPrefix(line, point, word string) string {
	if p, err := strconv.Atoi(point); err == nil && p >= 0 && p <= len(line) {
		line = line[:p]
	}
	last := line[strings.LastIndexAny(line, " \t")+1:]
	if len(last) > len(word) && strings.HasSuffix(last, word) {
		return last[:len(last)-len(word)]
	}
	return ""
}

// wordbreakWriter cuts a prefix from each line written to it: one
// completion per line.
type wordbreakWriter struct {
	w   io.Writer
	cut string
}

func (b *wordbreakWriter) Write(p []byte) (int, error) {
	if b.cut == "" {
		return b.w.Write(p)
	}
	lines := strings.SplitAfter(string(p), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, b.cut)
	}
	if _, err := io.WriteString(b.w, strings.Join(lines, "")); err != nil {
		return 0, err
	}
	return len(p), nil
}
