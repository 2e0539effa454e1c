// Package browsertest starts Debian's Chromium, headless, for tests that
// drive the dashboard in a real browser (chromedp).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// candidates are the names Chromium goes by.
var candidates = []string{"chromium", "chromium-browser", "google-chrome"}

// New starts a headless browser with a window of 1280×800 and returns a
// context of its first tab; the browser is closed when the test ends.
// Without Chromium the test is skipped, saying how to install it; under
// CI=true it fails instead.
func New(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		const why = "Chromium is not installed: apt-get install -y chromium (Debian) runs the dashboard's browser tests"
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-dev-shm-usage", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses root
	}
	// A bound on a stuck browser, not a timing assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancel()
	})
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return tab
}
