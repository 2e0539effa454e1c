package plugtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/blaiseagent/blaise-agent/hosts/hostd"
	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
)

// logEntry is one JSON log line of a session process, its keys in order.
type logEntry struct {
	level, prefix, msg string
	keys               []string
	values             []string // rendered
}

// parseLog reads the JSON log lines of session processes; other lines
// (a crash's stack) are skipped.
func parseLog(data []byte) []logEntry {
	var out []logEntry
	for _, line := range bytes.Split(data, []byte("\n")) {
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			continue
		}
		var e logEntry
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				break
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				break
			}
			var s string
			isString := json.Unmarshal(raw, &s) == nil
			if !isString {
				s = string(raw)
			}
			switch key := k.(string); key {
			case "time", "session":
			case "level":
				e.level = s
			case "prefix":
				e.prefix = s
			case "msg":
				e.msg = s
			default:
				if isString && (s == "" || strings.ContainsAny(s, " \t\n\"=")) {
					s = strconv.Quote(s)
				}
				e.keys, e.values = append(e.keys, key), append(e.values, s)
			}
		}
		out = append(out, e)
	}
	return out
}

// value returns the value of key, or "".
func (e logEntry) value(key string) string {
	if i := slices.Index(e.keys, key); i >= 0 {
		return e.values[i]
	}
	return ""
}

// renderLog shows the plugs' log lines and the runner's warnings and
// errors, in the order they were logged. The agent's stderr and the
// runner's debug lines are left out: their timing is not the plugs'.
func (w *workDir) renderLog(entries []logEntry) []byte {
	var b strings.Builder
	for _, e := range entries {
		plug := w.plugs[e.prefix] || strings.HasSuffix(e.prefix, ".star")
		if e.msg == chain.LogHostCommand || e.msg == chain.LogSetOutput || e.prefix == "agent" || !plug && e.level != "warn" && e.level != "error" {
			continue
		}
		b.WriteString(strings.ToUpper(e.level))
		if e.prefix != "" {
			b.WriteString(" " + e.prefix + ":")
		}
		b.WriteString(" " + e.msg)
		for i, k := range e.keys {
			b.WriteString(" " + k + "=" + e.values[i])
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// renderOutputs shows what plugs published with ctx.set_output.
func renderOutputs(entries []logEntry) []byte {
	var b strings.Builder
	for _, e := range entries {
		if e.msg == chain.LogSetOutput {
			fmt.Fprintf(&b, "%s: %s = %s\n", e.prefix, unquote(e.value("name")), unquote(e.value("value")))
		}
	}
	return []byte(b.String())
}

// renderCommands shows the commands the local host started, in order.
func renderCommands(entries []logEntry) []byte {
	var b strings.Builder
	for _, e := range entries {
		if e.msg != chain.LogHostCommand {
			continue
		}
		var argv []string
		_ = json.Unmarshal([]byte(e.value("argv")), &argv)
		fmt.Fprintf(&b, "$ %s  (in %s)\n", hostd.ShellJoin(argv), unquote(e.value("dir")))
	}
	return []byte(b.String())
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// fileState is a file of the workspace as a snapshot saw it.
type fileState struct {
	mode os.FileMode
	data []byte // content, or the link's target
}

// snapshot reads the files below root; .git (directory or file) is left
// out: what git keeps there changes with every commit and is not a plug's
// effect to compare.
func snapshot(root string) (map[string]fileState, error) {
	files := map[string]fileState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		var data []byte
		if d.Type()&fs.ModeSymlink != 0 {
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			data = []byte(t)
		} else if d.Type().IsRegular() {
			if data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		files[filepath.ToSlash(rel)] = fileState{mode: info.Mode(), data: data}
		return nil
	})
	return files, err
}

// maxShown is the largest text file shown whole in a host section.
const maxShown = 1024

// diffSnapshots lists the files created (+), changed (~) and removed (-);
// small text files are shown, others by size and SHA-256.
func diffSnapshots(before, after map[string]fileState) []byte {
	var b strings.Builder
	describe := func(f fileState) string {
		switch {
		case f.mode&fs.ModeSymlink != 0:
			return " -> " + string(f.data)
		case len(f.data) <= maxShown && utf8.Valid(f.data) && !bytes.ContainsRune(f.data, 0):
			s := fmt.Sprintf(" (%s)\n", f.mode.Perm())
			for _, l := range strings.SplitAfter(string(f.data), "\n") {
				if l != "" {
					s += "  | " + strings.TrimSuffix(l, "\n") + "\n"
				}
			}
			if len(f.data) > 0 && f.data[len(f.data)-1] != '\n' {
				s += "  (no newline at end)\n"
			}
			return strings.TrimSuffix(s, "\n")
		}
		return fmt.Sprintf(" (%s, %d bytes, sha256 %x)", f.mode.Perm(), len(f.data), sha256.Sum256(f.data))
	}
	var names []string
	for n := range before {
		names = append(names, n)
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		old, had := before[n]
		cur, has := after[n]
		switch {
		case !had:
			b.WriteString("+ " + n + describe(cur) + "\n")
		case !has:
			b.WriteString("- " + n + "\n")
		case old.mode != cur.mode || !bytes.Equal(old.data, cur.data):
			b.WriteString("~ " + n + describe(cur) + "\n")
		}
	}
	return []byte(b.String())
}

// readTranscript renders the records after offset: each message where it
// left the chain (M5), with the plug that answered it.
func readTranscript(path string, off int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, off, nil
	}
	if err != nil {
		return nil, off, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, off, err
	}
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, acp.MaxRecordLine)
	for sc.Scan() {
		off += int64(len(sc.Bytes())) + 1
		var r acp.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, off, fmt.Errorf("transcript %s: %w", path, err)
		}
		b.WriteString(r.Direction + " " + string(r.Message))
		if r.Plug != "" {
			b.WriteString("  (answered by " + r.Plug + ")")
		}
		b.WriteByte('\n')
	}
	return []byte(b.String()), off, sc.Err()
}

// renderPause shows the pause run n reported, if it did.
func renderPause(rec *lifecycle.Record, n int) []byte {
	p := rec.Pause
	if p == nil || p.Run != n {
		return nil
	}
	s := fmt.Sprintf("reason: %s\nmay_resume: %t\n", p.Reason, p.MayResume)
	if p.Error != "" {
		s += "error: " + p.Error + "\n"
	}
	return []byte(s)
}

// renderTeardown shows how the session ended, once it did.
func renderTeardown(rec *lifecycle.Record) []byte {
	if rec.State == lifecycle.Paused || rec.State == lifecycle.Active {
		return nil
	}
	s := fmt.Sprintf("reason: %s\nstate: %s\n", rec.EndReason, rec.State)
	if rec.Teardown.LastError != "" {
		s += "error: " + rec.Teardown.LastError + "\n"
	}
	return []byte(s)
}

// renderPersisted shows the plugs' persisted state, by plug id.
func renderPersisted(ctx context.Context, store *filestore.Store, session string) ([]byte, error) {
	ids, err := store.PersistedIDs(ctx, session)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, id := range ids {
		v, ok, err := store.Persisted().Get(ctx, session, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		name, _, _ := store.PersistedPlug(ctx, session, id)
		fmt.Fprintf(&b, "%s (%s): %s\n", id, name, v)
	}
	return []byte(b.String()), nil
}
