package client

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	sdk "github.com/coder/acp-go-sdk"
)

// errNotFound is ACP's error code for a resource that does not exist.
const errNotFound = -32002

// A fileAccess answers the agent's requests for files on the local file
// system, below root and nowhere else; "" refuses all access. Refusals are
// reported with diag.
type fileAccess struct {
	root string
	diag func(format string, args ...any)
}

// readFile answers fs/read_text_file from the local file system: the whole
// file, or Limit lines from line Line (1-based).
func (f fileAccess) readFile(params json.RawMessage) (any, error) {
	var req sdk.ReadTextFileRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, invalidParams(err)
	}
	if (req.Line != nil && *req.Line < 1) || (req.Limit != nil && *req.Limit < 0) {
		return nil, &RPCError{Code: acp.InvalidParams, Message: "Invalid params",
			Data: jsonObject("error", "line must be at least 1 and limit at least 0")}
	}
	path, err := f.resolve(sdk.ClientMethodFsReadTextFile, req.Path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &RPCError{Code: errNotFound, Message: "Resource not found", Data: jsonObject("path", req.Path)}
	}
	if err != nil {
		return nil, err
	}
	return sdk.ReadTextFileResponse{Content: selectLines(string(b), req.Line, req.Limit)}, nil
}

// selectLines returns limit lines of s from line number line (1-based),
// each with its line terminator; nil means from the first line, and to the
// last.
func selectLines(s string, line, limit *int) string {
	if line == nil && limit == nil {
		return s
	}
	start := 0
	if line != nil {
		start = *line - 1
	}
	for range start {
		_, rest, ok := strings.Cut(s, "\n")
		if !ok {
			return ""
		}
		s = rest
	}
	if limit == nil {
		return s
	}
	end := 0
	for range *limit {
		i := strings.IndexByte(s[end:], '\n')
		if i < 0 {
			return s
		}
		end += i + 1
	}
	return s[:end]
}

// writeFile answers fs/write_text_file on the local file system, creating
// the file and its directories as needed.
func (f fileAccess) writeFile(params json.RawMessage) (any, error) {
	var req sdk.WriteTextFileRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, invalidParams(err)
	}
	path, err := f.resolve(sdk.ClientMethodFsWriteTextFile, req.Path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(req.Content), 0o644); err != nil {
		return nil, err
	}
	return sdk.WriteTextFileResponse{}, nil
}

// resolve checks that path, from a request of method, is an absolute path
// within root, also once symbolic links are followed, and returns it
// cleaned. A path outside root is reported with diag and refused with -32602.
func (f fileAccess) resolve(method, path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", &RPCError{Code: acp.InvalidParams, Message: "path must be absolute", Data: jsonObject("path", path)}
	}
	path = filepath.Clean(path)
	root := ""
	if f.root != "" {
		var err error
		if root, err = filepath.Abs(f.root); err != nil {
			return "", err
		}
	}
	why := ""
	if root == "" {
		why = "no session root"
	} else {
		realRoot, err := filepath.EvalSymlinks(root)
		if err != nil {
			return "", err
		}
		// The agent may name files through root or through its real path.
		if !within(root, path) && !within(realRoot, path) {
			why = "outside " + root
		} else if real, ok := evalExisting(path); !ok || !within(realRoot, real) {
			why = "a symbolic link leads outside " + root
		}
	}
	if why != "" {
		f.diag("refused %s %s: %s", method, path, why)
		return "", &RPCError{Code: acp.InvalidParams, Message: "path is outside the session root",
			Data: jsonObject("path", path, "root", root)}
	}
	return path, nil
}

// evalExisting returns path with the symbolic links of its longest existing
// prefix followed; false when a link on the way cannot be followed (it
// dangles or loops). path must be clean and absolute.
func evalExisting(path string) (string, bool) {
	rest := ""
	for dir := path; ; dir = filepath.Dir(dir) {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(real, rest), true
		}
		if _, lerr := os.Lstat(dir); lerr == nil || dir == filepath.Dir(dir) {
			return "", false
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// within reports whether path is root or below it; both must be clean and
// absolute.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
