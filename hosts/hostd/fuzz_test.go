package hostd

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// FuzzReadHeader: no input makes the header decoder crash, allocate more
// than its limit, or accept a header it cannot write back.
func FuzzReadHeader(f *testing.F) {
	var b bytes.Buffer
	writeHeader(&b, request{Op: opExec, Argv: []string{"true"}, Env: map[string]string{"A": "b"}, Stdin: []byte{0, 1}})
	f.Add(b.Bytes())
	b.Reset()
	writeHeader(&b, response{Err: &wireError{Msg: "x", Op: "stat", Path: "p", Errno: 2, Kind: "not_exist"}})
	f.Add(b.Bytes())
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 9, '{'})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req request
		err := readHeader(bytes.NewReader(data), &req)
		if len(data) >= 4 && binary.BigEndian.Uint32(data) > maxHeader && err == nil {
			t.Fatalf("accepted a header over the limit")
		}
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := writeHeader(&out, req); err != nil {
			t.Fatalf("cannot write back %+v: %v", req, err)
		}
		var again request
		if err := readHeader(&out, &again); err != nil {
			t.Fatalf("cannot read back what was written: %v", err)
		}
		var resp response
		_ = readHeader(bytes.NewReader(data), &resp)
		if resp.Err != nil {
			_ = resp.Err.decode(true).Error()
			_ = resp.Err.decode(false).Error()
		}
	})
}

// FuzzReadHello: the handshake decoder refuses, with an error, whatever is
// not a version line of this version followed by a JSON hello.
func FuzzReadHello(f *testing.F) {
	var b bytes.Buffer
	writeHello(&b, Version, Hello{OS: "linux", Arch: "amd64", Home: "/root"})
	f.Add(b.Bytes())
	f.Add([]byte("blaise-hostd 2\n{}\n"))
	f.Add([]byte("blaise-hostd x\n"))
	f.Add([]byte("SSH-2.0-OpenSSH\r\n"))
	f.Add([]byte("blaise-hostd 1\n{\"os\":"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := readHello(bufio.NewReader(bytes.NewReader(data)), Version)
		if err == nil && !strings.HasPrefix(string(data), magic+"1\n") && !strings.HasPrefix(string(data), magic+"1\r\n") {
			t.Fatalf("accepted %q", data)
		}
	})
}
