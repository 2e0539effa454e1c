package runstore

import (
	"bytes"

	"github.com/blaiseagent/blaise-agent/internal/acp"
)

// storedLines is what to store of appended lines that carry the run's
// messages toward the client (acp.Carrier): their records, without the
// messages carried alone and with the records stored apart untagged. It
// returns data itself when every line is a record, else the records in
// *buf.
func storedLines(data []byte, buf *[]byte) []byte {
	tagged := len(data) > 0 && data[0] != '{'
	for i := 0; !tagged; {
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 || i+j+1 == len(data) {
			break
		}
		i += j + 1
		tagged = data[i] != '{'
	}
	if !tagged {
		return data
	}
	out := (*buf)[:0]
	for rest := data; len(rest) > 0; {
		line := rest
		if j := bytes.IndexByte(rest, '\n'); j >= 0 {
			line = rest[:j+1]
		}
		rest = rest[len(line):]
		switch line[0] {
		case acp.CarriedForward:
		case acp.CarriedStored:
			out = append(out, line[1:]...)
		default:
			out = append(out, line...)
		}
	}
	*buf = out
	return out
}
