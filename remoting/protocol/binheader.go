package protocol

import (
	"encoding/binary"
	"fmt"
)

// The ROCKETMQ binary header (serialize type 1), big-endian:
//
//	code int16 | language uint8 | version int16 | opaque int32 | flag int32 |
//	remarkLen int32 | remark | extLen int32 | ext entries
//
// each ext entry is keyLen int16 | key | valLen int32 | value. A zero
// length string reads back as empty. Fixed part: 21 bytes.

const binaryFixedLen = 21

func appendBinaryHeader(dst []byte, c *Command) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Code))
	dst = append(dst, byte(c.Language))
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	if f := c.fieldsMap(); len(f) > 0 {
		var stack [24]string
		for _, k := range sortedFieldKeys(f, stack[:0]) {
			if len(k) > 0x7FFF {
				continue // not representable; Java's encoder cannot send it either
			}
			v := f[k]
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
			dst = append(dst, k...)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
			dst = append(dst, v...)
		}
	}
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst
}

func decodeBinaryHeader(b []byte, c *Command) error {
	if len(b) < binaryFixedLen {
		return fmt.Errorf("%w: binary header of %d bytes, need %d", ErrBadHeader, len(b), binaryFixedLen)
	}
	c.Code = int32(int16(binary.BigEndian.Uint16(b)))
	c.Language = LanguageCode(b[2])
	c.Version = int32(int16(binary.BigEndian.Uint16(b[3:])))
	c.Opaque = int32(binary.BigEndian.Uint32(b[5:]))
	c.Flag = int32(binary.BigEndian.Uint32(b[9:]))
	hs := string(b) // one allocation; remark, keys and values are slices of it
	rlen := binary.BigEndian.Uint32(b[13:])
	p := b[17:]
	if uint64(rlen) > uint64(len(p)) {
		return fmt.Errorf("%w: remark length %d exceeds header", ErrBadHeader, rlen)
	}
	if rlen > 0 {
		c.Remark = hs[17 : 17+rlen]
	}
	p = p[rlen:]
	if len(p) < 4 {
		return fmt.Errorf("%w: binary header truncated before extFields length", ErrBadHeader)
	}
	elen := binary.BigEndian.Uint32(p)
	p = p[4:]
	if uint64(elen) > uint64(len(p)) {
		return fmt.Errorf("%w: extFields length %d exceeds header", ErrBadHeader, elen)
	}
	m := p[:elen]
	off := len(b) - len(p) // offset of m in b and hs
	if elen > 0 {
		c.ExtFields = make(ExtFields, min(countBinFields(m), maxFieldsHint))
	}
	for len(m) > 0 {
		if len(m) < 2 {
			return fmt.Errorf("%w: truncated extFields key length", ErrBadHeader)
		}
		kl := int(binary.BigEndian.Uint16(m))
		m = m[2:]
		off += 2
		if kl > len(m) {
			return fmt.Errorf("%w: extFields key length %d exceeds map", ErrBadHeader, kl)
		}
		k := hs[off : off+kl]
		m = m[kl:]
		off += kl
		if len(m) < 4 {
			return fmt.Errorf("%w: truncated extFields value length", ErrBadHeader)
		}
		vl := binary.BigEndian.Uint32(m)
		m = m[4:]
		off += 4
		if uint64(vl) > uint64(len(m)) {
			return fmt.Errorf("%w: extFields value length %d exceeds map", ErrBadHeader, vl)
		}
		c.ExtFields[k] = hs[off : off+int(vl)]
		m = m[vl:]
		off += int(vl)
	}
	return nil
}

// maxFieldsHint caps the size hint of a decoded extFields map: a header of
// many tiny or repeated entries (up to MaxFrameSize of them) must not make
// the decoder allocate a map for all of them up front; beyond the hint the
// map grows with what it really holds.
const maxFieldsHint = 64

// countBinFields counts the entries of a binary extFields map up to the
// first malformed one (the decoder reports that), to size the map once.
func countBinFields(m []byte) int {
	n := 0
	for len(m) >= 2 {
		kl := int(binary.BigEndian.Uint16(m))
		if 2+kl+4 > len(m) {
			break
		}
		vl := binary.BigEndian.Uint32(m[2+kl:])
		m = m[2+kl+4:]
		if uint64(vl) > uint64(len(m)) {
			break
		}
		m = m[vl:]
		n++
	}
	return n
}
