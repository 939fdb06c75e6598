package record

import (
	"fmt"
	"strings"
)

// Whole-record CRC (RocketMQ 5's CRC property), frozen; see doc.go
// "Record CRC trailer".
const (
	// PropertyCRC32 is the key of the property holding the whole-record CRC.
	PropertyCRC32 = "__CRC32#"
	// TrailerSize is the size of the CRC property at the end of PROPERTIES:
	// key, 0x01, 10 digits, 0x02.
	TrailerSize = len(PropertyCRC32) + 1 + trailerDigits + 1 // 20

	trailerDigits = 10
)

// Integrity says how a verified record is protected.
type Integrity int

const (
	// Sealed: the record ends with a CRC trailer and the CRC of every byte
	// before it matches.
	Sealed Integrity = iota
	// Legacy: a record written without a trailer (SmartGo before record
	// CRCs, RocketMQ 4.x); only BODYCRC and the structure could be checked.
	Legacy
)

// String returns "sealed" or "legacy".
func (i Integrity) String() string {
	if i == Sealed {
		return "sealed"
	}
	return "legacy"
}

// sealExtra is what sealing adds to a properties string of props: the
// trailer, preceded by a separator unless props is empty or ends with one.
func sealExtra(props string) int {
	if len(props) > 0 && props[len(props)-1] != PropertySeparator {
		return TrailerSize + 1
	}
	return TrailerSize
}

// SealedSize returns the size of m's record with a CRC trailer: Size(m)
// plus the trailer and, when m.Properties does not end with 0x02, a
// separator.
func SealedSize(m *Message) int { return Size(m) + sealExtra(m.Properties) }

// SealedPropertiesLen returns the PROPERTIESLEN of a sealed record whose
// properties string (before sealing) has length n and ends with last (0 if
// n == 0).
func SealedPropertiesLen(n int, last byte) int {
	if n > 0 && last != PropertySeparator {
		return n + 1 + TrailerSize
	}
	return n + TrailerSize
}

// EncodeSealedTo writes the record for m with a CRC trailer into
// dst[:SealedSize(m)] and returns the number of bytes written: the record
// EncodeTo writes, with its properties string followed by a separator (if
// needed) and the trailer, PROPERTIESLEN and TOTALSIZE counting them, and
// the CRC taken over every byte before the trailer. m.Properties must not
// hold a PropertyCRC32 pair already (StripCRCProperty). It does not
// allocate.
func EncodeSealedTo(dst []byte, m *Message) (int, error) {
	if _, err := validate(m); err != nil {
		return 0, err
	}
	extra := sealExtra(m.Properties)
	if len(m.Properties)+extra > MaxPropertiesLen {
		return 0, fmt.Errorf("%w: %d bytes with the CRC property, max %d", ErrPropertiesTooLong, len(m.Properties)+extra, MaxPropertiesLen)
	}
	n := Size(m) + extra
	if len(dst) < n {
		return 0, fmt.Errorf("%w: sealed record needs %d bytes, have %d", ErrShortBuffer, n, len(dst))
	}
	b := dst[:n]
	if _, err := encode(b, m, n, len(m.Properties)+extra); err != nil {
		return 0, err
	}
	p := n - extra
	if extra > TrailerSize {
		b[p] = PropertySeparator
	}
	Seal(b)
	return n, nil
}

// Seal computes the CRC of rec[:len(rec)-TrailerSize] (a complete record
// whose last TrailerSize bytes are reserved for the trailer) and writes the
// trailer there.
func Seal(rec []byte) {
	t := rec[len(rec)-TrailerSize:]
	putTrailer(t, RecordCRC(rec))
}

// RecordCRC is the whole-record CRC of a sealed record: CRC32-IEEE of every
// byte before the trailer, masked to 31 bits (as RocketMQ's UtilAll.crc32).
func RecordCRC(rec []byte) uint32 {
	return checksumIEEE(rec[:len(rec)-TrailerSize]) & 0x7FFFFFFF
}

// putTrailer writes key 0x01 digits 0x02; the digits are the decimal value
// of crc least significant first, padded with '0' (RocketMQ's order).
func putTrailer(t []byte, crc uint32) {
	copy(t, PropertyCRC32)
	t[len(PropertyCRC32)] = NameValueSeparator
	d := t[len(PropertyCRC32)+1 : len(PropertyCRC32)+1+trailerDigits]
	for i := range d {
		d[i] = '0' + byte(crc%10)
		crc /= 10
	}
	t[TrailerSize-1] = PropertySeparator
}

// trailerCRC decodes the trailer at the end of props: ok=false when props
// does not end with a well-formed trailer.
func trailerCRC(props []byte) (crc uint32, ok bool) {
	if len(props) < TrailerSize {
		return 0, false
	}
	t := props[len(props)-TrailerSize:]
	if string(t[:len(PropertyCRC32)]) != PropertyCRC32 || t[len(PropertyCRC32)] != NameValueSeparator || t[TrailerSize-1] != PropertySeparator {
		return 0, false
	}
	d := t[len(PropertyCRC32)+1 : len(PropertyCRC32)+1+trailerDigits]
	var v uint64
	for i := len(d) - 1; i >= 0; i-- {
		c := d[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > 0x7FFFFFFF {
		return 0, false
	}
	return uint32(v), true
}

// trailerDamaged reports whether the end of props looks like a CRC trailer
// that lost some of its bytes: such a record is damaged, not legacy. It
// does when
//
//   - the last bytes (up to TrailerSize) are all zero, or
//   - at least six of the eight key bytes are in place, or
//   - every one of the last TrailerSize bytes is either what a trailer has
//     there (key byte, separator, digit, end byte) or zero (a trailer whose
//     value overflows 31 bits is one of these).
//
// A properties string written by a producer does not pass this by chance:
// it would have to end in zeros, in a key within two bytes of "__CRC32#",
// or in nothing but trailer bytes and zeros. Damage that leaves a trailer
// unrecognisable has to overwrite most of it with bytes other than zeros.
func trailerDamaged(props []byte) bool {
	tail := props[max(0, len(props)-TrailerSize):]
	if len(tail) > 0 && allZero(tail) {
		return true
	}
	if len(tail) < TrailerSize {
		return false
	}
	key, match, zero := 0, 0, 0
	for i, c := range tail {
		var ok bool
		switch {
		case i < len(PropertyCRC32):
			ok = c == PropertyCRC32[i]
			if ok {
				key++
			}
		case i == len(PropertyCRC32):
			ok = c == NameValueSeparator
		case i == TrailerSize-1:
			ok = c == PropertySeparator
		default:
			ok = c >= '0' && c <= '9'
		}
		switch {
		case ok:
			match++
		case c == 0:
			zero++
		}
	}
	return key >= 6 || match+zero == TrailerSize
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// verify checks the integrity of a parsed record (v) whose bytes are rec
// (exactly TOTALSIZE long).
func verify(v *View, rec []byte) (Integrity, error) {
	if want, ok := trailerCRC(v.Properties); ok {
		if got := RecordCRC(rec); got != want {
			return Sealed, corrupt(len(rec)-TrailerSize, "CRC32", "record CRC 0x%08X, trailer says 0x%08X", got, want)
		}
		return Sealed, nil
	}
	if trailerDamaged(v.Properties) {
		return Sealed, corrupt(len(rec)-min(len(v.Properties), TrailerSize), "CRC32", "damaged CRC trailer")
	}
	if crc := BodyCRC(v.Body); crc != v.BodyCRC {
		return Legacy, corrupt(OffsetBodyCRC, "BODYCRC", "stored 0x%08X, body has 0x%08X", v.BodyCRC, crc)
	}
	return Legacy, nil
}

// Verify parses the record at the start of b and checks its integrity: a
// sealed record's CRC covers every byte before its trailer; a legacy
// record (no trailer) is checked by BODYCRC. Anything else, including a
// damaged trailer, is a *CorruptError. A filler gives an error wrapping
// ErrBlank. It does not allocate unless it fails.
func Verify(b []byte) (Integrity, error) {
	v, err := Parse(b, false)
	if err != nil {
		return Legacy, err
	}
	return verify(&v, b[:v.TotalSize])
}

// IsSealed reports whether a properties string ends with a well-formed CRC
// trailer (its CRC not checked).
func IsSealed(props []byte) bool {
	_, ok := trailerCRC(props)
	return ok
}

// StripCRCProperty returns props without any PropertyCRC32 pair (a message
// read back from a sealed record and put again, e.g. to a retry topic, is
// sealed afresh). props is returned as is when it holds none.
func StripCRCProperty(props string) string {
	if !HasCRCProperty(props) {
		return props
	}
	var b strings.Builder
	b.Grow(len(props))
	for pos := 0; pos < len(props); {
		end := strings.IndexByte(props[pos:], PropertySeparator)
		if end < 0 {
			end = len(props)
		} else {
			end += pos + 1
		}
		chunk := props[pos:end]
		if !strings.HasPrefix(chunk, PropertyCRC32+string(NameValueSeparator)) {
			b.WriteString(chunk)
		}
		pos = end
	}
	return b.String()
}

// HasCRCProperty reports whether props holds PropertyCRC32. It looks for
// the key's rarest byte, its last ('#'), first: one vector scan that
// finds none in most properties, where a search for the key stops at
// every '_' (UNIQ_KEY has one).
func HasCRCProperty(props string) bool {
	return strings.IndexByte(props, PropertyCRC32[len(PropertyCRC32)-1]) >= 0 &&
		strings.Contains(props, PropertyCRC32)
}

// UserProperties returns props without a trailing CRC trailer, for
// showing a record's properties as the producer set them.
func UserProperties(props []byte) []byte {
	if !IsSealed(props) {
		return props
	}
	return props[: len(props)-TrailerSize : len(props)-TrailerSize]
}
