package twin

import (
	"bytes"
	"sort"
	"strconv"
	"strings"
)

// tri is a three-valued truth: a comparison with a missing field or a
// value of another type is undefined, and only true selects a twin.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triUndef
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

// eval evaluates a condition on a record.
func eval(x Expr, r *record) tri {
	switch x := x.(type) {
	case *AndExpr:
		l := eval(x.L, r)
		if l == triFalse {
			return triFalse
		}
		rr := eval(x.R, r)
		switch {
		case rr == triFalse:
			return triFalse
		case l == triTrue && rr == triTrue:
			return triTrue
		}
		return triUndef
	case *OrExpr:
		l := eval(x.L, r)
		if l == triTrue {
			return triTrue
		}
		rr := eval(x.R, r)
		switch {
		case rr == triTrue:
			return triTrue
		case l == triFalse && rr == triFalse:
			return triFalse
		}
		return triUndef
	case *NotExpr:
		switch eval(x.X, r) {
		case triTrue:
			return triFalse
		case triFalse:
			return triTrue
		}
		return triUndef
	case *CmpExpr:
		v, ok := fieldValue(r, x.Path)
		if !ok {
			return triUndef
		}
		return compare(&v, x.Op, &x.Lit.v)
	case *InExpr:
		v, ok := fieldValue(r, x.Path)
		if !ok {
			return triUndef
		}
		for i := range x.Lits {
			if compare(&v, "=", &x.Lits[i].v) == triTrue {
				return triTrue
			}
		}
		return triFalse
	case *FuncExpr:
		v, ok := fieldValue(r, x.Path)
		if x.Name == "IS_DEFINED" {
			return triOf(ok)
		}
		if !ok || v.kind != KindString {
			return triUndef
		}
		if x.Name == "STARTSWITH" {
			return triOf(strings.HasPrefix(v.str, x.Arg))
		}
		return triOf(strings.HasSuffix(v.str, x.Arg))
	}
	return triUndef
}

// compare applies op to two values of the same scalar type; anything else
// is undefined.
func compare(a *node, op string, b *node) tri {
	ka, kb := a.kind, b.kind
	if ka == KindTrue || ka == KindFalse {
		if kb != KindTrue && kb != KindFalse {
			return triUndef
		}
		switch op {
		case "=":
			return triOf(ka == kb)
		case "!=":
			return triOf(ka != kb)
		}
		return triUndef
	}
	if ka != kb {
		return triUndef
	}
	var c int
	switch ka {
	case KindNumber:
		switch {
		case a.num < b.num:
			c = -1
		case a.num > b.num:
			c = 1
		}
	case KindString:
		c = strings.Compare(a.str, b.str)
	default:
		return triUndef
	}
	switch op {
	case "=":
		return triOf(c == 0)
	case "!=":
		return triOf(c != 0)
	case "<":
		return triOf(c < 0)
	case ">":
		return triOf(c > 0)
	case "<=":
		return triOf(c <= 0)
	default:
		return triOf(c >= 0)
	}
}

// fieldValue resolves a query path on a record: tags..., properties
// .desired|.reported... (with $version), or a root field of the twin.
func fieldValue(r *record, path []string) (node, bool) {
	str := func(s string) (node, bool) { return node{kind: KindString, str: s}, true }
	num := func(v int64) (node, bool) { return node{kind: KindNumber, num: float64(v)}, true }
	switch path[0] {
	case "tags":
		if n := lookupPath(&r.tags, path[1:]); n != nil {
			return *n, true
		}
		return node{}, false
	case "properties":
		if len(path) < 2 {
			return node{}, false
		}
		var sec *node
		var ver int64
		switch path[1] {
		case "desired":
			sec, ver = &r.desired, r.desiredVer
		case "reported":
			sec, ver = &r.reported, r.reportedVer
		default:
			return node{}, false
		}
		if len(path) == 3 && path[2] == "$version" {
			return num(ver)
		}
		if n := lookupPath(sec, path[2:]); n != nil {
			return *n, true
		}
		return node{}, false
	}
	if len(path) == 2 {
		switch path[0] + "." + path[1] {
		case "capabilities.iotEdge":
			if r.isModule() {
				return node{}, false
			}
			return node{kind: KindFalse + Kind(b2i(r.id.iotEdge))}, true
		case "x509Thumbprint.primaryThumbprint":
			return optStr(r.id.primaryThumb)
		case "x509Thumbprint.secondaryThumbprint":
			return optStr(r.id.secondThumb)
		}
		return node{}, false
	}
	if len(path) != 1 {
		return node{}, false
	}
	switch path[0] {
	case "deviceId":
		return str(r.deviceID)
	case "moduleId":
		if !r.isModule() {
			return node{}, false
		}
		return str(r.moduleID)
	case "etag":
		return str(Etag(r.version))
	case "deviceEtag":
		return str(identityEtag(r.id.etagVer))
	case "status":
		return str(statusName(r.id.status))
	case "statusReason":
		return optStr(r.id.statusReason)
	case "statusUpdateTime":
		return str(FormatTime(r.id.statusUpdated))
	case "connectionState":
		if r.id.connected {
			return str(StateConnected)
		}
		return str(StateDisconnected)
	case "lastActivityTime":
		return str(FormatTime(r.id.lastActivity))
	case "authenticationType":
		return str(authNames[r.id.auth])
	case "version":
		return num(r.version)
	case "cloudToDeviceMessageCount":
		return num(c2dCount(r, wallNow()))
	case "modelId":
		return str(r.id.modelID)
	}
	return node{}, false
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func optStr(s string) (node, bool) {
	if s == "" {
		return node{}, false
	}
	return node{kind: KindString, str: s}, true
}

// queryChunk is how many twins a query looks at per hold of the read
// lock, so a long scan never stalls writers for long.
const queryChunk = 2048

// source is where a query's candidates come from, in key order: a keyset
// (the collection or an index posting), a sorted key list, or the keys of
// a collection with a prefix.
type source struct {
	ks     *keyset
	keys   []string // sorted; used when ks is nil
	prefix string   // with ks: only keys with this prefix (a range scan)
}

// ascend calls fn for the candidates after the key after, in order.
func (s *source) ascend(after string, fn func(k string) bool) {
	if s.ks == nil {
		i := sort.SearchStrings(s.keys, after)
		if i < len(s.keys) && s.keys[i] == after {
			i++
		}
		for ; i < len(s.keys); i++ {
			if !fn(s.keys[i]) {
				return
			}
		}
		return
	}
	if s.prefix != "" {
		start := s.prefix
		if after > start {
			s.ks.ascend(after, func(k string) bool { return strings.HasPrefix(k, s.prefix) && fn(k) })
			return
		}
		s.ks.from(start, func(k string) bool { return strings.HasPrefix(k, s.prefix) && fn(k) })
		return
	}
	s.ks.ascend(after, fn)
}

// planLocked picks the candidates of a query: the smallest index posting,
// key list or key range a top-level AND term allows, else the whole
// collection.
//
// An order comparison (<, >, <=, >=) on an indexed field gathers the
// postings of the values that satisfy it into a sorted key list, worth
// it only when few twins match: a listing stops once its page is full,
// so a scan looks at about limit·n/m twins for m matches spread over n
// (the list costs about m); a count (limit 0) looks at all n.
func (e *Engine) planLocked(q *Query, limit int) source {
	coll, all := byte('d'), &e.devs
	if q.Modules {
		coll, all = 'm', &e.mods
	}
	best := source{ks: all}
	bestCost := all.len() + 1
	consider := func(s source, cost int) {
		if cost < bestCost {
			best, bestCost = s, cost
		}
	}
	var terms []Expr
	var flatten func(x Expr)
	flatten = func(x Expr) {
		if a, ok := x.(*AndExpr); ok {
			flatten(a.L)
			flatten(a.R)
			return
		}
		terms = append(terms, x)
	}
	if q.Where != nil {
		flatten(q.Where)
	}
	for _, t := range terms {
		switch t := t.(type) {
		case *CmpExpr:
			if rangeOp(t.Op) && e.idx.indexed(t.Path) {
				lists, m := e.rangePostings(coll, t.Path, t.Op, &t.Lit.v)
				n := all.len()
				if m >= bestCost || (limit == 0 && m > n/2) || (limit > 0 && m*m > limit*n) {
					continue
				}
				keys := make([]string, 0, m)
				for _, ks := range lists {
					ks.ascend("", func(k string) bool { keys = append(keys, k); return true })
				}
				sort.Strings(keys) // the postings of distinct values are disjoint
				consider(source{keys: keys}, m)
				continue
			}
			if t.Op != "=" {
				continue
			}
			if s, cost, ok := e.keySource(q, all, t.Path, []Literal{t.Lit}); ok {
				consider(s, cost)
			} else if e.idx.indexed(t.Path) {
				ks := e.idx.lookup(coll, strings.Join(t.Path, "."), &t.Lit.v)
				if ks == nil {
					consider(source{}, 0) // nothing has that value
				} else {
					consider(source{ks: ks}, ks.len())
				}
			}
		case *InExpr:
			if s, cost, ok := e.keySource(q, all, t.Path, t.Lits); ok {
				consider(s, cost)
			} else if e.idx.indexed(t.Path) {
				path := strings.Join(t.Path, ".")
				var keys []string
				for i := range t.Lits {
					if ks := e.idx.lookup(coll, path, &t.Lits[i].v); ks != nil {
						ks.ascend("", func(k string) bool { keys = append(keys, k); return true })
					}
				}
				consider(source{keys: sortedUnique(keys)}, len(keys))
			}
		case *FuncExpr:
			if t.Name == "STARTSWITH" && len(t.Path) == 1 && t.Path[0] == "deviceId" && t.Arg != "" {
				consider(source{ks: all, prefix: t.Arg}, all.len()/2)
			}
		}
	}
	return best
}

func rangeOp(op string) bool { return op == "<" || op == ">" || op == "<=" || op == ">=" }

// rangePostings returns the postings of (coll, path) whose value
// satisfies op lit, and how many twins they hold. Objects and arrays
// never compare.
func (e *Engine) rangePostings(coll byte, path []string, op string, lit *node) (lists []*keyset, m int) {
	e.idx.values(coll, strings.Join(path, "."), func(val string, ks *keyset) {
		if val == nonScalar {
			return
		}
		v := scalarValue(val)
		if compare(&v, op, lit) == triTrue {
			lists = append(lists, ks)
			m += ks.len()
		}
	})
	return lists, m
}

// keySource turns deviceId (and, for modules, moduleId-free) equality
// into a key list or range: devices by key, modules by the device's key
// range.
func (e *Engine) keySource(q *Query, all *keyset, path []string, lits []Literal) (source, int, bool) {
	if len(path) != 1 || path[0] != "deviceId" {
		return source{}, 0, false
	}
	if q.Modules {
		if len(lits) != 1 || lits[0].v.kind != KindString {
			return source{}, 0, false
		}
		return source{ks: all, prefix: lits[0].v.str + "/"}, 1, true
	}
	var keys []string
	for _, l := range lits {
		if l.v.kind == KindString {
			keys = append(keys, l.v.str)
		}
	}
	keys = sortedUnique(keys)
	return source{keys: keys}, len(keys), true
}

func sortedUnique(keys []string) []string {
	sort.Strings(keys)
	out := keys[:0]
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			out = append(out, k)
		}
	}
	return out
}

// query serves OpQuery: it parses the query, plans it, and scans the
// candidates after req.After in chunks under the read lock. A listing
// returns a JSON array of at most Limit items and Next (the last key
// looked at) when the page filled; an aggregate returns every group of
// this shard as a JSON array of [value, count] pairs (value null when the
// GROUP BY field is undefined).
func (e *Engine) query(req *Request) Reply {
	q, err := ParseQuery(string(req.Body))
	if err != nil {
		return errReply(AsError(err))
	}
	limit := e.pageLimit(req.Limit)
	agg := q.Aggregate()
	groups := map[string]*int64{}
	var gbuf []byte
	body := []byte{'['}
	n := 0
	after := req.After
	if agg && req.After == "" {
		e.mu.RLock()
		fast, ok := e.countLocked(q)
		e.mu.RUnlock()
		if ok {
			return Reply{Status: StatusOK, Body: appendGroups(nil, fast)}
		}
	}
	var src source
	planned := false
	for {
		e.mu.RLock()
		if !planned {
			lim := limit
			if agg {
				lim = 0
			}
			src, planned = e.planLocked(q, lim), true
		}
		seen, done := 0, true
		src.ascend(after, func(k string) bool {
			if seen == queryChunk {
				done = false
				return false
			}
			seen++
			after = k
			r := e.recs[k]
			if r == nil || r.isModule() != q.Modules || (q.Where != nil && eval(q.Where, r) != triTrue) {
				return true
			}
			if agg {
				gbuf = gbuf[:0]
				if q.GroupBy != nil {
					if v, ok := fieldValue(r, q.GroupBy); ok {
						gbuf = appendValue(gbuf, &v)
					}
				}
				if c := groups[string(gbuf)]; c != nil { // no allocation for a known group
					*c++
				} else {
					groups[string(gbuf)] = new(int64)
					*groups[string(gbuf)] = 1
				}
				return true
			}
			if n > 0 {
				body = append(body, ',')
			}
			body = q.appendItem(body, r)
			n++
			if n == limit {
				done = true
				return false
			}
			return true
		})
		e.mu.RUnlock()
		if done {
			break
		}
	}
	if agg {
		return Reply{Status: StatusOK, Body: appendGroups(nil, groups)}
	}
	rep := Reply{Status: StatusOK, Body: append(body, ']')}
	if n == limit {
		rep.Next = after
	}
	return rep
}

// countLocked answers a count from the index's posting sizes, without
// looking at a twin, when the query is COUNT() with
//   - no WHERE, or a WHERE of one =, IN, <, >, <= or >= term on an indexed
//     path, and no GROUP BY; or
//   - no WHERE and GROUP BY an indexed path that holds a scalar on every
//     twin that has it.
//
// ok is false for any other query (it is then counted by a scan). The
// groups are keyed as the scan keys them: the value's JSON, "" when
// undefined.
func (e *Engine) countLocked(q *Query) (groups map[string]*int64, ok bool) {
	coll, all := byte('d'), &e.devs
	if q.Modules {
		coll, all = 'm', &e.mods
	}
	groups = map[string]*int64{}
	add := func(key string, n int64) {
		if n <= 0 {
			return
		}
		if c := groups[key]; c != nil {
			*c += n
		} else {
			groups[key] = &n
		}
	}
	if q.GroupBy == nil {
		var path []string
		var lits []Literal
		switch w := q.Where.(type) {
		case nil:
			add("", int64(all.len()))
			return groups, true
		case *CmpExpr:
			if rangeOp(w.Op) && e.idx.indexed(w.Path) {
				_, m := e.rangePostings(coll, w.Path, w.Op, &w.Lit.v)
				add("", int64(m))
				return groups, true
			}
			if w.Op != "=" {
				return nil, false
			}
			path, lits = w.Path, []Literal{w.Lit}
		case *InExpr:
			path, lits = w.Path, w.Lits
		default:
			return nil, false
		}
		if !e.idx.indexed(path) {
			return nil, false
		}
		keys := map[string]bool{}
		for i := range lits {
			k, ok := scalarKey(&lits[i].v)
			if !ok {
				return nil, false
			}
			keys[k] = true // -0 is read as 0: one posting
		}
		p := strings.Join(path, ".")
		var n int64
		for k := range keys {
			if ks := e.idx.post[postingKey(coll, p, k)]; ks != nil {
				n += int64(ks.len())
			}
		}
		add("", n)
		return groups, true
	}
	if q.Where != nil || !e.idx.indexed(q.GroupBy) {
		return nil, false
	}
	var total int64
	scalar := true
	var buf []byte
	e.idx.values(coll, strings.Join(q.GroupBy, "."), func(val string, ks *keyset) {
		if val == nonScalar {
			scalar = false
			return
		}
		v := scalarValue(val)
		buf = appendValue(buf[:0], &v)
		add(string(buf), int64(ks.len()))
		total += int64(ks.len())
	})
	if !scalar {
		return nil, false
	}
	add("", int64(all.len())-total)
	return groups, true
}

// appendItem renders one result of a listing: the twin, or the projection
// of the select list (undefined fields left out).
func (q *Query) appendItem(dst []byte, r *record) []byte {
	if q.Star {
		return appendTwinJSON(dst, r)
	}
	dst = append(dst, '{')
	first := true
	for _, it := range q.Items {
		v, ok := fieldValue(r, it.Path)
		if !ok {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, it.Alias)
		dst = append(dst, ':')
		dst = appendValue(dst, &v)
	}
	return append(dst, '}')
}

// Group is one group of an aggregate query: the JSON of the GROUP BY
// value (nil when undefined, or without GROUP BY) and its count.
type Group struct {
	Value []byte
	Count int64
}

func appendGroups(dst []byte, groups map[string]*int64) []byte {
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	dst = append(dst, '[')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		if k == "" {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, k...)
		}
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, *groups[k], 10)
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// DecodeGroups reads a shard's aggregate reply (Reply.Body of an
// aggregate query).
func DecodeGroups(body []byte) ([]Group, error) {
	v, err := parseJSON(body)
	if err != nil {
		return nil, err
	}
	if v.kind != KindArray {
		return nil, invalidf("aggregate reply is not an array")
	}
	out := make([]Group, 0, len(v.kids))
	for i := range v.kids {
		p := &v.kids[i]
		if p.kind != KindArray || len(p.kids) != 2 || p.kids[1].kind != KindNumber {
			return nil, invalidf("aggregate reply: group %d is not [value, count]", i)
		}
		g := Group{Count: int64(p.kids[1].num)}
		if p.kids[0].kind != KindNull {
			g.Value = appendValue(nil, &p.kids[0])
		}
		out = append(out, g)
	}
	return out, nil
}

// MergeGroups adds the groups of several shards: equal values' counts are
// summed; the result is in value order (undefined first).
func MergeGroups(lists ...[]Group) []Group {
	sum := map[string]int64{}
	for _, l := range lists {
		for _, g := range l {
			sum[string(g.Value)] += g.Count
		}
	}
	out := make([]Group, 0, len(sum))
	for k, c := range sum {
		g := Group{Count: c}
		if k != "" {
			g.Value = []byte(k)
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Value, out[j].Value) < 0 })
	return out
}

// AggregateRows renders an aggregate query's result rows from its merged
// groups: per group an object with the GROUP BY field under its name
// (left out when undefined) and the count under the COUNT() name. A
// COUNT() without GROUP BY over no twins gives one row with 0.
func (q *Query) AggregateRows(groups []Group) [][]byte {
	if q.GroupBy == nil && len(groups) == 0 {
		groups = []Group{{}}
	}
	rows := make([][]byte, 0, len(groups))
	for _, g := range groups {
		row := []byte{'{'}
		first := true
		for _, it := range q.Items {
			if !it.Count && g.Value == nil {
				continue
			}
			if !first {
				row = append(row, ',')
			}
			first = false
			row = appendString(row, it.Alias)
			row = append(row, ':')
			if it.Count {
				row = strconv.AppendInt(row, g.Count, 10)
			} else {
				row = append(row, g.Value...)
			}
		}
		rows = append(rows, append(row, '}'))
	}
	return rows
}
