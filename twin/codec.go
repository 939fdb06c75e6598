package twin

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"strconv"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxField bounds one length-prefixed field of an entry, snapshot or wire
// body (far above every document limit).
const maxField = 64 << 20

// enc appends the binary forms of doc.go: uvarints, strings (uvarint
// length then bytes) and values.
type enc struct{ b []byte }

func (e *enc) u8(v byte)        { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) u64(v uint64)     { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *enc) crc()             { e.b = binary.BigEndian.AppendUint32(e.b, crc32.Checksum(e.b, castagnoli)) }
func (e *enc) value(n *node)    { e.valueM(n, false) }
func (e *enc) metaValue(n *node) {
	e.valueM(n, true)
}

func (e *enc) boolean(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// valueM writes KIND, then with meta the node's UPD and VER varints, then
// the payload.
func (e *enc) valueM(n *node, meta bool) {
	e.u8(byte(n.kind))
	if meta {
		e.varint(n.upd)
		e.varint(n.ver)
	}
	e.payloadM(n, meta)
}

func (e *enc) payloadM(n *node, meta bool) {
	switch n.kind {
	case KindNumber:
		e.u64(math.Float64bits(n.num))
	case KindString:
		e.str(n.str)
	case KindObject:
		e.uvarint(uint64(len(n.kids)))
		for i := range n.kids {
			e.str(n.kids[i].key)
			e.valueM(&n.kids[i], meta)
		}
	case KindArray:
		e.uvarint(uint64(len(n.kids)))
		for i := range n.kids {
			e.value(&n.kids[i]) // array elements carry no metadata
		}
	}
}

// dec reads what enc writes; after the first error every read returns
// zero values and err says where it failed (wrapping ErrCorrupt).
type dec struct {
	b   []byte
	off int
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = corruptf("%s at byte %d", what, d.off)
	}
}

func (d *dec) u8() byte {
	if d.err != nil || d.off >= len(d.b) {
		d.fail("truncated")
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *dec) boolean() bool {
	v := d.u8()
	if v > 1 {
		d.fail("bad boolean")
	}
	return v == 1
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *dec) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *dec) u64() uint64 {
	if d.err != nil || len(d.b)-d.off < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

func (d *dec) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > maxField || n > uint64(len(d.b)-d.off) {
		d.fail("field length " + strconv.FormatUint(n, 10))
		return nil
	}
	v := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return v
}

func (d *dec) str() string { return string(d.bytes()) }

// count reads an element count, each element taking at least min bytes.
func (d *dec) count(min int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)-d.off)/uint64(min) {
		d.fail("count " + strconv.FormatUint(n, 10) + " exceeds the bytes left")
		return 0
	}
	return int(n)
}

func (d *dec) value() node     { return d.valueM(false, 0) }
func (d *dec) metaValue() node { return d.valueM(true, 0) }

func (d *dec) valueM(meta bool, depth int) node {
	if depth > maxParseNesting {
		d.fail("value nested too deep")
		return node{}
	}
	n := node{kind: Kind(d.u8())}
	if meta {
		n.upd, n.ver = d.varint(), d.varint()
	}
	switch n.kind {
	case KindNull, KindFalse, KindTrue:
	case KindNumber:
		n.num = math.Float64frombits(d.u64())
		if math.IsNaN(n.num) || math.IsInf(n.num, 0) {
			d.fail("non-finite number")
		}
	case KindString:
		n.str = d.str()
	case KindObject:
		c := d.count(2)
		if c > 0 {
			n.kids = make([]node, 0, c)
		}
		for i := 0; i < c && d.err == nil; i++ {
			k := d.str()
			v := d.valueM(meta, depth+1)
			if i > 0 && n.kids[i-1].key >= k {
				d.fail("object members out of order")
			}
			v.key = k
			n.kids = append(n.kids, v)
		}
	case KindArray:
		c := d.count(1)
		n.kids = make([]node, 0, c)
		for i := 0; i < c && d.err == nil; i++ {
			n.kids = append(n.kids, d.valueM(false, depth+1))
		}
	default:
		d.fail("unknown value kind " + strconv.Itoa(int(n.kind)))
	}
	return n
}

// checkCRC verifies and strips the trailing CRC32-C of b.
func checkCRC(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, corruptf("%d bytes, shorter than a checksum", len(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, corruptf("checksum mismatch")
	}
	return body, nil
}
