package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestRecordBatchGolden(t *testing.T) {
	got := AppendBatchItem(nil, 7, []byte("hi"), "TAGS\x01A")
	checkFields(t, got, []field{
		{"TOTALSIZE", u32(22 + 2 + 6)},
		{"MAGICCODE", u32(0)},
		{"BODYCRC", u32(0)},
		{"FLAG", u32(7)},
		{"BODYLEN", u32(2)},
		{"BODY", []byte("hi")},
		{"PROPERTIESLEN", u16(6)},
		{"PROPERTIES", []byte("TAGS\x01A")},
	})
}

type batchMsg struct {
	flag  int32
	body  []byte
	props string
}

func TestRecordBatchRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var in []batchMsg
	var body []byte
	for i := range 500 {
		m := batchMsg{flag: int32(r.Uint32()), props: "UNIQ_KEY\x01" + string(rune('A'+i%26))}
		if n := r.IntN(300); n > 0 {
			m.body = bytes.Repeat([]byte{byte(i)}, n)
		}
		if i%7 == 0 {
			m.props = ""
		}
		in = append(in, m)
		body = AppendBatchItem(body, m.flag, m.body, m.props)
	}
	i := 0
	err := ForEachBatchItem(body, func(it BatchItem) error {
		w := in[i]
		if it.Flag != w.flag || !bytes.Equal(it.Body, w.body) || string(it.Properties) != w.props {
			t.Fatalf("item %d = %d %q %q, want %d %q %q", i, it.Flag, it.Body, it.Properties, w.flag, w.body, w.props)
		}
		i++
		return nil
	})
	if err != nil || i != len(in) {
		t.Fatalf("ForEachBatchItem: %v after %d items", err, i)
	}
	if err := ForEachBatchItem(nil, func(BatchItem) error { t.Fatal("item in empty batch"); return nil }); err != nil {
		t.Errorf("empty batch: %v", err)
	}
	stop := errors.New("stop")
	n := 0
	if err := ForEachBatchItem(body, func(BatchItem) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("callback error: %v after %d items", err, n)
	}
	if a := testing.AllocsPerRun(100, func() {
		_ = ForEachBatchItem(body, func(BatchItem) error { return nil })
	}); a != 0 {
		t.Errorf("ForEachBatchItem allocates %.1f", a)
	}
}

func TestRecordBatchMalformed(t *testing.T) {
	good := AppendBatchItem(AppendBatchItem(nil, 1, []byte("abc"), "K\x01V"), 2, []byte("de"), "")
	first := 22 + 3 + 3
	put32 := func(off int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.BigEndian.PutUint32(b[off:], v)
		return b
	}
	cases := []struct {
		name   string
		b      []byte
		field  string
		offset int
		items  int // items delivered before the error
	}{
		{"truncated second item", good[:len(good)-1], "TOTALSIZE", first, 1},
		{"trailing garbage", append(bytes.Clone(good), 1, 2, 3), "TOTALSIZE", len(good), 2},
		{"size below minimum", put32(0, 21), "TOTALSIZE", 0, 0},
		{"negative size", put32(0, 0xFFFFFFFF), "TOTALSIZE", 0, 0},
		{"size overruns", put32(first, 1000), "TOTALSIZE", first, 1},
		{"negative body length", put32(16, 0x80000000), "BODYLEN", 16, 0},
		{"body length overruns", put32(16, 100), "BODYLEN", 16, 0},
		{"body length short", put32(16, 2), "PROPERTIESLEN", 22, 0},
		{"negative properties length", func() []byte {
			b := bytes.Clone(good)
			b[23] = 0x80
			return b
		}(), "PROPERTIESLEN", 23, 0},
	}
	for _, c := range cases {
		n := 0
		err := ForEachBatchItem(c.b, func(BatchItem) error { n++; return nil })
		var ce *CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want *CorruptError", c.name, err)
			continue
		}
		if ce.Field != c.field || ce.Offset != c.offset || n != c.items {
			t.Errorf("%s: %v after %d items; want %s at %d after %d", c.name, err, n, c.field, c.offset, c.items)
		}
	}
}
