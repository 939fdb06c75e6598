package record

// Batch item layout (frozen; protocol section 3.2). Fixed part:
// TOTALSIZE(4) MAGICCODE(4) BODYCRC(4) FLAG(4) BODYLEN(4) ... PROPERTIESLEN(2).
const batchItemFixed = 4 + 4 + 4 + 4 + 4 + 2

// BatchItem is one message of a SEND_BATCH_MESSAGE body. Body and Properties
// point into the batch body.
type BatchItem struct {
	Flag       int32
	Body       []byte
	Properties []byte
}

// BatchItemLen is the length of the batch item AppendBatchItem appends
// for a body and properties of these lengths: a batch's buffer can be
// sized once.
func BatchItemLen(bodyLen, propertiesLen int) int { return batchItemFixed + bodyLen + propertiesLen }

// AppendBatchItem appends one batch item to dst, as a client does (MAGICCODE
// and BODYCRC written as 0). It validates nothing: properties must not exceed
// MaxPropertiesLen (ForEachBatchItem rejects such an item).
func AppendBatchItem(dst []byte, flag int32, body []byte, properties string) []byte {
	n := batchItemFixed + len(body) + len(properties)
	dst = be.AppendUint32(dst, uint32(n))
	dst = be.AppendUint32(dst, 0) // MAGICCODE
	dst = be.AppendUint32(dst, 0) // BODYCRC
	dst = be.AppendUint32(dst, uint32(flag))
	dst = be.AppendUint32(dst, uint32(len(body)))
	dst = append(dst, body...)
	dst = be.AppendUint16(dst, uint16(len(properties)))
	return append(dst, properties...)
}

// ForEachBatchItem calls fn for each item of a batch body, stopping at the
// first error fn returns (which it returns as is). Malformed input
// (truncated item, TOTALSIZE that disagrees with the lengths inside, negative
// lengths) yields a *CorruptError whose Offset is relative to body; items
// before the bad one have already been passed to fn. MAGICCODE and BODYCRC
// are not checked (clients write 0). It never panics and does not allocate
// unless it fails.
func ForEachBatchItem(body []byte, fn func(BatchItem) error) error {
	for off := 0; off < len(body); {
		rest := len(body) - off
		if rest < batchItemFixed {
			return corrupt(off, "TOTALSIZE", "truncated batch item: %d bytes left, need at least %d", rest, batchItemFixed)
		}
		size := int64(int32(be.Uint32(body[off:])))
		if size < batchItemFixed {
			return corrupt(off, "TOTALSIZE", "item size %d below minimum %d", size, batchItemFixed)
		}
		if size > int64(rest) {
			return corrupt(off, "TOTALSIZE", "item size %d overruns batch (%d bytes left)", size, rest)
		}
		n := int(size)
		item := body[off : off+n : off+n]
		flag := int32(be.Uint32(item[12:]))
		bodyLen := int64(int32(be.Uint32(item[16:])))
		if bodyLen < 0 {
			return corrupt(off+16, "BODYLEN", "negative length %d", bodyLen)
		}
		if bodyLen > int64(n-batchItemFixed) {
			return corrupt(off+16, "BODYLEN", "length %d overruns item of %d bytes", bodyLen, n)
		}
		p := 20 + int(bodyLen)
		propsLen := int(int16(be.Uint16(item[p:])))
		if propsLen < 0 {
			return corrupt(off+p, "PROPERTIESLEN", "negative length %d", propsLen)
		}
		if end := p + 2 + propsLen; end != n {
			if end > n {
				return corrupt(off+p, "PROPERTIESLEN", "length %d overruns item of %d bytes", propsLen, n)
			}
			return corrupt(off+p, "PROPERTIESLEN", "length %d leaves %d unused bytes in item of %d bytes", propsLen, n-end, n)
		}
		if err := fn(BatchItem{
			Flag:       flag,
			Body:       item[20:p:p],
			Properties: item[p+2 : n : n],
		}); err != nil {
			return err
		}
		off += n
	}
	return nil
}
