package runstore

import "testing"

// TestSparesKeepBuffersOfRecordsSizes: spares keep buffers of a stream's
// appends' sizes only, at most spareBytes of them, and hand out one large
// enough, empty, or none.
func TestSparesKeepBuffersOfRecordsSizes(t *testing.T) {
	var s spares
	s.put(make([]byte, 10))                 // too small to be worth keeping
	s.put(make([]byte, spareMax+1))         // too large to keep
	s.put(make([]byte, spareMin, 1<<20))    // kept
	s.put(make([]byte, spareMin, spareMin)) // kept
	if len(s.bufs) != 2 || s.bytes != 1<<20+spareMin {
		t.Fatalf("%d buffers kept (%d bytes), want the 2 of a stream's sizes", len(s.bufs), s.bytes)
	}
	if b := s.take(spareMin + 1); cap(b) != 1<<20 || len(b) != 0 {
		t.Fatalf("take(%d): len %d cap %d, want the empty 1 MiB buffer", spareMin+1, len(b), cap(b))
	}
	if b := s.take(spareMin + 1); b != nil {
		t.Fatalf("take: cap %d from a spare too small", cap(b))
	}
	for range spareBytes/spareMax + 2 {
		s.put(make([]byte, 0, spareMax))
	}
	if s.bytes > spareBytes || s.bytes < spareBytes-spareMax {
		t.Fatalf("%d bytes kept, want at most %d, and no room left for another buffer", s.bytes, spareBytes)
	}
}
