package twin

import (
	"slices"
	"strconv"
	"strings"
)

// indexMask selects the parts of a record whose index entries an update
// removes and adds again.
type indexMask uint8

const (
	idxRoot indexMask = 1 << iota
	idxTags
	idxDesired
	idxReported
	idxAll = idxRoot | idxTags | idxDesired | idxReported
)

// index is the query index of a shard: for each (collection, path,
// scalar value) the ordered set of twin keys holding that value there. It
// covers status and connectionState, every scalar leaf of tags, and the
// configured property paths (Options.IndexPaths). Queries use it for =
// and IN on those paths, and counts (COUNT() with no WHERE but one such
// term, GROUP BY such a path) read the postings' sizes; deviceId and
// moduleId need no index (the twins are kept in key order).
//
// The twins holding an object or an array at a covered path (any object
// level of tags) are kept under the value key nonScalar, so a count knows
// when a path is not scalar on every twin that has it.
type index struct {
	desired  [][]string // configured paths below properties.desired, split
	reported [][]string
	post     map[string]*keyset
	// byPath holds the same postings by collection+path, then value key.
	byPath  map[string]map[string]*keyset
	entries int
}

// nonScalar is the value key of objects and arrays.
const nonScalar = "x"

func (x *index) init(paths []string) {
	x.post = map[string]*keyset{}
	x.byPath = map[string]map[string]*keyset{}
	for _, p := range paths {
		segs := strings.Split(p, ".")
		if segs[1] == "desired" {
			x.desired = append(x.desired, segs[2:])
		} else {
			x.reported = append(x.reported, segs[2:])
		}
	}
}

// indexed reports whether a query path (split) is covered by the index.
func (x *index) indexed(path []string) bool {
	switch {
	case len(path) == 1:
		return path[0] == "status" || path[0] == "connectionState"
	case path[0] == "tags":
		return true
	case len(path) > 2 && path[0] == "properties":
		list := x.reported
		if path[1] == "desired" {
			list = x.desired
		}
		for _, p := range list {
			if slices.Equal(p, path[2:]) {
				return true
			}
		}
	}
	return false
}

// scalarKey encodes a scalar for a posting key: a type letter, then the
// string or the shortest form of the number. false for non-scalars.
func scalarKey(n *node) (string, bool) {
	switch n.kind {
	case KindString:
		return "s" + n.str, true
	case KindNumber:
		return "n" + strconv.FormatFloat(n.num, 'g', -1, 64), true
	case KindTrue:
		return "t", true
	case KindFalse:
		return "f", true
	}
	return "", false
}

func collection(r *record) byte {
	if r.isModule() {
		return 'm'
	}
	return 'd'
}

// postingKey is collection, path, NUL, scalar key.
func postingKey(coll byte, path, val string) string {
	var b strings.Builder
	b.Grow(len(path) + len(val) + 2)
	b.WriteByte(coll)
	b.WriteString(path)
	b.WriteByte(0)
	b.WriteString(val)
	return b.String()
}

// each calls fn with every posting key of r under mask.
func (x *index) each(r *record, mask indexMask, fn func(pk string)) {
	coll := collection(r)
	if mask&idxRoot != 0 {
		fn(postingKey(coll, "status", "s"+statusName(r.id.status)))
		state := StateDisconnected
		if r.id.connected {
			state = StateConnected
		}
		fn(postingKey(coll, "connectionState", "s"+state))
	}
	if mask&idxTags != 0 {
		var walk func(n *node, path string)
		walk = func(n *node, path string) {
			for i := range n.kids {
				k := &n.kids[i]
				p := path + "." + k.key
				if v, ok := scalarKey(k); ok {
					fn(postingKey(coll, p, v))
					continue
				}
				fn(postingKey(coll, p, nonScalar))
				if k.kind == KindObject {
					walk(k, p)
				}
			}
		}
		walk(&r.tags, "tags")
	}
	for _, sec := range []struct {
		bit   indexMask
		root  *node
		name  string
		paths [][]string
	}{{idxDesired, &r.desired, "properties.desired.", x.desired}, {idxReported, &r.reported, "properties.reported.", x.reported}} {
		if mask&sec.bit == 0 {
			continue
		}
		for _, p := range sec.paths {
			if n := lookupPath(sec.root, p); n != nil {
				v, ok := scalarKey(n)
				if !ok {
					v = nonScalar
				}
				fn(postingKey(coll, sec.name+strings.Join(p, "."), v))
			}
		}
	}
}

func (x *index) add(r *record, mask indexMask) {
	x.each(r, mask, func(pk string) {
		ks := x.post[pk]
		if ks == nil {
			ks = &keyset{}
			x.post[pk] = ks
			path, val := splitPostingKey(pk)
			vals := x.byPath[path]
			if vals == nil {
				vals = map[string]*keyset{}
				x.byPath[path] = vals
			}
			vals[val] = ks
		}
		if ks.insert(r.key) {
			x.entries++
		}
	})
}

func (x *index) remove(r *record, mask indexMask) {
	x.each(r, mask, func(pk string) {
		ks := x.post[pk]
		if ks != nil && ks.delete(r.key) {
			x.entries--
			if ks.len() == 0 {
				delete(x.post, pk)
				path, val := splitPostingKey(pk)
				if vals := x.byPath[path]; vals != nil {
					delete(vals, val)
					if len(vals) == 0 {
						delete(x.byPath, path)
					}
				}
			}
		}
	})
}

// splitPostingKey splits a posting key into collection+path and the
// value key.
func splitPostingKey(pk string) (path, val string) {
	i := strings.IndexByte(pk, 0)
	return pk[:i], pk[i+1:]
}

// values calls fn with each value key of (collection, path) and its
// posting (nonScalar included), in no order.
func (x *index) values(coll byte, path string, fn func(val string, ks *keyset)) {
	for v, ks := range x.byPath[string(coll)+path] {
		fn(v, ks)
	}
}

// scalarValue is the value a scalar key stands for (scalarKey's inverse).
func scalarValue(key string) node {
	switch key[0] {
	case 's':
		return node{kind: KindString, str: key[1:]}
	case 'n':
		f, _ := strconv.ParseFloat(key[1:], 64)
		return node{kind: KindNumber, num: f}
	case 't':
		return node{kind: KindTrue}
	}
	return node{kind: KindFalse}
}

// lookup returns the posting of (collection, path, scalar), or nil.
func (x *index) lookup(coll byte, path string, lit *node) *keyset {
	v, ok := scalarKey(lit)
	if !ok {
		return nil
	}
	return x.post[postingKey(coll, path, v)]
}

// lookupPath follows path (member names) from an object.
func lookupPath(n *node, path []string) *node {
	for _, seg := range path {
		if n = n.get(seg); n == nil {
			return nil
		}
	}
	return n
}
