package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/browsertest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/chromedp/chromedp"
)

// adminTab is a browser tab signed in as the dashboard's first admin,
// created with the setup token serve printed, and a function that does
// steps in it, naming what fails.
func (l *serverLab) adminTab(t *testing.T) (context.Context, func(what string, steps ...chromedp.Action[chromedp.Void])) {
	t.Helper()
	m := setupToken.FindStringSubmatch(l.logs.String())
	if m == nil {
		t.Fatalf("serve printed no setup token:\n%s", l.logs)
	}
	tab := browsertest.New(t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tab, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("creating the first admin", chromedp.Navigate(l.url+"/setup"),
		chromedp.SendKeys(chromedp.ID("token"), m[1]), chromedp.SendKeys(chromedp.ID("name"), "ada"),
		chromedp.SendKeys(chromedp.ID("password"), "correct horse battery"),
		chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("form.signout")))
	return tab, do
}

// TestChangesOfASessionInABrowser: in a real browser, against a real
// `serve` and a runner in a git repository with blaise:worktree, a
// session's page links its changes; they show its diff, escaped, by file,
// added lines marked, with the summary on top; a merge refused by a dirty
// main checkout says so and changes nothing; a confirmed merge lands in
// the runner's repository, its output in the page, which then offers to
// end the session, and ending it (confirmed) does. The pages pass
// axe-core.
func TestChangesOfASessionInABrowser(t *testing.T) {
	t.Parallel()
	l, _, id := newActionsLab(t)
	notes := "hello <b>&amp;</b>\n"
	if err := os.WriteFile(filepath.Join(l.dir, ".worktrees", id, "notes.txt"), []byte(notes), 0o644); err != nil {
		t.Fatal(err)
	}
	tab, do := l.adminTab(t)
	shots := screenshotDir(t)
	changes := `a[href="/sessions/` + id + `/changes"]`
	do("the session's page", chromedp.Navigate(l.url+"/sessions/"+id), chromedp.WaitVisible(chromedp.CSS(changes)))
	do("its changes", chromedp.Click(chromedp.CSS(changes)), chromedp.WaitVisible(chromedp.CSS("figure.file")))
	waitText(t, tab, "pre.stat", "1 file changed, 1 insertion")
	waitText(t, tab, "figure.file figcaption", "notes.txt +1 −0")
	if got, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("figure.file pre .dadd").textContent`)); err != nil || got != "+"+strings.TrimSuffix(notes, "\n") {
		t.Fatalf("the added line: %q (%v), want it whole, escaped, marked +", got, err)
	}
	if n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll("figure.file b").length`)); err != nil || n != 0 {
		t.Fatalf("the diff's text made %d elements (%v)", n, err)
	}
	shoot(t, tab, shots, "changes")

	// A main checkout with uncommitted changes refuses the merge.
	ignore := filepath.Join(l.dir, ".gitignore")
	clean, err := os.ReadFile(ignore)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ignore, append(clean, "# local\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	do("a merge", chromedp.Click(chromedp.CSS(`form[action$="/changes/merge"] button`)), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
	do("confirming it", chromedp.Click(chromedp.CSS("form.confirm button.danger")), chromedp.WaitVisible(chromedp.ID("outcome")))
	waitText(t, tab, `#outcome[role="alert"]`, "The merge failed")
	waitText(t, tab, `#outcome`, ".gitignore")
	if _, err := os.Stat(filepath.Join(l.dir, "notes.txt")); !os.IsNotExist(err) {
		t.Fatalf("a refused merge wrote notes.txt into the main checkout: %v", err)
	}
	if err := os.WriteFile(ignore, clean, 0o644); err != nil {
		t.Fatal(err)
	}

	do("back to the changes", chromedp.Click(chromedp.CSS(`main a[href="/sessions/`+id+`/changes"]:not([aria-current])`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action$="/changes/merge"]`)))
	do("a merge", chromedp.Click(chromedp.CSS(`form[action$="/changes/merge"] button`)), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
	shoot(t, tab, shots, "changes-confirm")
	do("confirming it", chromedp.Click(chromedp.CSS("form.confirm button.danger")), chromedp.WaitVisible(chromedp.ID("outcome")))
	waitText(t, tab, "#outcome", "The merge is done")
	waitText(t, tab, "#output", "merged branch blaise/"+id+" into main")
	shoot(t, tab, shots, "changes-merged")
	if b, err := os.ReadFile(filepath.Join(l.dir, "notes.txt")); err != nil || string(b) != notes {
		t.Fatalf("the main checkout after the merge: %q %v", b, err)
	}
	do("ending the session", chromedp.Click(chromedp.CSS(`form[action$="/end"] button`)), chromedp.WaitVisible(chromedp.CSS("form.confirm")),
		chromedp.Click(chromedp.CSS("form.confirm button.danger")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	testsupport.Eventually(t, "the session ends", func() bool { return l.session(id).State == lifecycle.Ended })
}
