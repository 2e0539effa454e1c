package runstore

import (
	"bytes"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// BenchmarkTranscriptCoders is why a run sends its transcript's records
// as they were written: what deflate's fastest level (which runs used),
// S2 and zstd's fastest level cost on a megabyte of records of varied
// text, a stream's batch, and the ratio each gets. Carrying a record of
// 1.2 KiB as it is costs the session process, the runner and the server
// about 3 µs together (docs/server.md#speed): deflate and zstd cost more
// than that to pack it, and S2 about what the bytes it saves cost.
// `go test ./internal/store/runstore -run '^$' -bench Coders`.
func BenchmarkTranscriptCoders(b *testing.B) {
	var batch bytes.Buffer
	rec := acp.NewJSONLRecorder(&batch)
	for _, u := range acptest.Updates(1024) {
		m, err := acp.Parse([]byte(u))
		if err != nil {
			b.Fatal(err)
		}
		rec.Record(acp.ToClient, m, "")
	}
	if err := rec.Flush(); err != nil {
		b.Fatal(err)
	}
	in := batch.Bytes()
	var out bytes.Buffer
	fw, _ := flate.NewWriter(&out, flate.BestSpeed)
	zw, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	dst := make([]byte, s2.MaxEncodedLen(len(in)))
	coders := []struct {
		name string
		pack func() int
	}{
		{"deflate-fastest", func() int {
			out.Reset()
			fw.Reset(&out)
			fw.Write(in)
			fw.Close()
			return out.Len()
		}},
		{"s2", func() int { return len(s2.Encode(dst, in)) }},
		{"zstd-fastest", func() int { return len(zw.EncodeAll(in, dst[:0])) }},
	}
	for _, c := range coders {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			n := 0
			for b.Loop() {
				n = c.pack()
			}
			b.ReportMetric(float64(len(in))/float64(n), "ratio")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(in))*1200, "ns/record")
		})
	}
}
