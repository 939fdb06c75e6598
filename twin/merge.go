package twin

import (
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"time"
)

// stamp is the metadata a change writes: $lastUpdated (Unix ms, the log
// record's store time) and, in desired, $lastUpdatedVersion (the new
// desired $version). A zero stamp (tags) writes nothing.
type stamp struct{ upd, ver int64 }

// mergePatch merges an object patch into the object dst recursively (RFC
// 7386 style): a null member deletes, an object member merges into an
// object already there (or replaces a non-object), anything else replaces.
// Every object on the way and every written member gets st, so a level
// whose member was removed records the removal in its own $lastUpdated.
func mergePatch(dst, patch *node, st stamp) {
	dst.upd, dst.ver = st.upd, st.ver
	for i := range patch.kids {
		p := &patch.kids[i]
		switch {
		case p.kind == KindNull:
			dst.del(p.key)
		case p.kind == KindObject:
			if cur := dst.get(p.key); cur != nil && cur.kind == KindObject {
				mergePatch(cur, p, st)
				continue
			}
			dst.set(p.key, materialize(p, st))
		default:
			dst.set(p.key, materialize(p, st))
		}
	}
}

// materialize returns a stored copy of a patch value: nulls inside objects
// dropped (deleting what does not exist), every object level and member
// stamped. Arrays are leaves: copied as they are, stamped as a whole.
func materialize(p *node, st stamp) node {
	out := node{key: p.key, kind: p.kind, num: p.num, str: p.str, upd: st.upd, ver: st.ver}
	switch p.kind {
	case KindObject:
		n := 0
		for i := range p.kids {
			if p.kids[i].kind != KindNull {
				n++
			}
		}
		if n > 0 {
			out.kids = make([]node, 0, n)
		}
		for i := range p.kids {
			if p.kids[i].kind == KindNull {
				continue
			}
			out.kids = append(out.kids, materialize(&p.kids[i], st))
		}
	case KindArray:
		out.kids = make([]node, len(p.kids))
		for i := range p.kids {
			out.kids[i] = p.kids[i].clone()
		}
	}
	return out
}

// tighten reallocates the member slices that appends left with spare
// capacity, so a stored tree holds no slack (twins are many and long
// lived).
func tighten(n *node) {
	if cap(n.kids) > len(n.kids) {
		if len(n.kids) == 0 {
			n.kids = nil
		} else {
			n.kids = append(make([]node, 0, len(n.kids)), n.kids...)
		}
	}
	for i := range n.kids {
		tighten(&n.kids[i])
	}
}

// diffPatch returns the patch that turns old into new (both objects) when
// merged with mergePatch: members only in old become null, members that
// differ carry new's value (objects on both sides as their own diff).
func diffPatch(old, new *node) node {
	out := node{kind: KindObject}
	i, j := 0, 0
	for i < len(old.kids) || j < len(new.kids) {
		switch {
		case j == len(new.kids) || (i < len(old.kids) && old.kids[i].key < new.kids[j].key):
			out.kids = append(out.kids, node{key: old.kids[i].key, kind: KindNull})
			i++
		case i == len(old.kids) || new.kids[j].key < old.kids[i].key:
			out.kids = append(out.kids, new.kids[j].clone())
			j++
		default:
			o, n := &old.kids[i], &new.kids[j]
			switch {
			case o.kind == KindObject && n.kind == KindObject:
				if d := diffPatch(o, n); len(d.kids) > 0 {
					d.key = n.key
					out.kids = append(out.kids, d)
				}
			case !o.equal(n):
				out.kids = append(out.kids, n.clone())
			}
			i++
			j++
		}
	}
	return out
}

// sectionRoot extracts a section from a request: an object whose root
// members "$version" and "$metadata" (read-only, echoed back by clients
// that send a document they read) are dropped; the rest must pass the key,
// string and depth rules. A null section is returned as is (the caller
// decides what it means).
func sectionRoot(v *node, sec Section) (node, *Error) {
	if v.kind == KindNull {
		return node{kind: KindNull}, nil
	}
	if v.kind != KindObject {
		return node{}, invalidf("%s must be a JSON object", sec)
	}
	out := node{kind: KindObject}
	for i := range v.kids {
		if k := v.kids[i].key; k == "$version" || k == "$metadata" {
			continue
		}
		out.kids = append(out.kids, v.kids[i])
	}
	if err := checkSection(&out, sec); err != nil {
		return node{}, err
	}
	return out, nil
}

// ---- rendering ----

// timeLayout is $lastUpdated's format: UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z"

// zeroTime is what a time never set renders as (IoT Hub's form).
const zeroTime = "0001-01-01T00:00:00Z"

func appendTime(dst []byte, ms int64) []byte {
	dst = append(dst, '"')
	if ms == 0 {
		dst = append(dst, zeroTime...)
	} else {
		dst = time.UnixMilli(ms).UTC().AppendFormat(dst, timeLayout)
	}
	return append(dst, '"')
}

// FormatTime renders a Unix ms time the way twin documents do.
func FormatTime(ms int64) string {
	b := appendTime(nil, ms)
	return string(b[1 : len(b)-1])
}

// metaMode says which metadata a section renders.
type metaMode uint8

const (
	metaNone     metaMode = iota // tags, patches
	metaReported                 // $lastUpdated
	metaDesired                  // $lastUpdated and $lastUpdatedVersion
)

// appendSection appends a section object: its members, then (unless
// mode is metaNone) "$metadata" when withMeta and "$version".
func appendSection(dst []byte, root *node, mode metaMode, withMeta bool, version int64) []byte {
	dst = append(dst, '{')
	dst = appendMembers(dst, root)
	if mode != metaNone {
		if len(root.kids) > 0 {
			dst = append(dst, ',')
		}
		if withMeta {
			dst = append(dst, `"$metadata":`...)
			dst = appendMeta(dst, root, mode)
			dst = append(dst, ',')
		}
		dst = append(dst, `"$version":`...)
		dst = strconv.AppendInt(dst, version, 10)
	}
	return append(dst, '}')
}

// appendMeta appends the $metadata object of an object: per member (in key
// order) the member's own metadata object, then the level's $lastUpdated
// (and $lastUpdatedVersion for desired).
func appendMeta(dst []byte, n *node, mode metaMode) []byte {
	dst = append(dst, '{')
	if n.kind == KindObject {
		for i := range n.kids {
			k := &n.kids[i]
			dst = appendString(dst, k.key)
			dst = append(dst, ':')
			dst = appendMeta(dst, k, mode)
			dst = append(dst, ',')
		}
	}
	dst = append(dst, `"$lastUpdated":`...)
	dst = appendTime(dst, n.upd)
	if mode == metaDesired {
		dst = append(dst, `,"$lastUpdatedVersion":`...)
		dst = strconv.AppendInt(dst, n.ver, 10)
	}
	return append(dst, '}')
}

// Etag returns the twin etag of a twin version: the base64 of its 8
// big-endian bytes ("AAAAAAAAAAE=" for 1), IoT Hub's form.
func Etag(version int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(version))
	return base64.StdEncoding.EncodeToString(b[:])
}

// identityEtag returns an identity's etag: the base64 of its version in
// decimal ("MQ==" for 1).
func identityEtag(version int64) string {
	return base64.StdEncoding.EncodeToString(strconv.AppendInt(nil, version, 10))
}

// CreatedIdentity reports whether etag, an identity's etag as a write
// returned it, is that of an identity the write created: an identity's
// first etag is its version 1, and every later write of it moves the
// version on.
func CreatedIdentity(etag string) bool { return normalizeEtag(etag) == identityEtag(1) }

// etagMatches applies an If-Match value to a current etag: empty matches
// anything, "*" matches any existing document, otherwise the values must
// be equal after surrounding quotes (and a weak "W/" prefix) are removed.
func etagMatches(ifMatch, etag string) bool {
	m := normalizeEtag(ifMatch)
	return m == "" || m == "*" || m == etag
}

func normalizeEtag(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[len(s)-1] == ' ') {
		if s[0] == ' ' {
			s = s[1:]
		} else {
			s = s[:len(s)-1]
		}
	}
	if len(s) > 2 && s[0] == 'W' && s[1] == '/' {
		s = s[2:]
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	return s
}
