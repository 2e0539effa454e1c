package lifecycle

import "fmt"

// Changes is the summary of a session's changes to its environment that a
// plug reports (ctx.report_changes): lines added and removed, files
// changed. sessions lists it, so that it costs nothing to show.
type Changes struct {
	Added   int `json:"added"`
	Removed int `json:"removed"`
	Files   int `json:"files"`
}

// String is the summary as sessions shows it: "+12 −3, 2 files".
func (c Changes) String() string {
	files := "files"
	if c.Files == 1 {
		files = "file"
	}
	return fmt.Sprintf("+%d −%d, %d %s", c.Added, c.Removed, c.Files, files)
}
