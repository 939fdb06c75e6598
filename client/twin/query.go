package twin

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	tw "github.com/smartgo/smartgo/twin"
)

// DefaultPageSize is the page size of Query and ListDevices when the
// caller gives none.
const DefaultPageSize = 100

// QueryOptions pages a query.
type QueryOptions struct {
	// PageSize is the most items a page holds (default 100; the brokers
	// cap it at their page limit, 1000 by default).
	PageSize int
	// Continuation is the token of the page to read (a previous page's
	// Continuation); "" reads the first page.
	Continuation string
}

// QueryPage is one page of a query's results.
type QueryPage struct {
	// Items are JSON objects: whole twins for SELECT *, projections for a
	// field list, count rows for COUNT() (with GROUP BY: one per group).
	Items []json.RawMessage
	// Aggregate is true for a COUNT() query (its items are not twins).
	Aggregate bool
	// Continuation asks for the next page; "" on the last page. A page
	// may be short, or even empty, and still have a continuation.
	Continuation string
}

// Query runs a twin query (the language of docs/twins.md): a listing is
// read page by page, shard after shard, each in id order; a COUNT() is
// counted on every shard at once and summed, in one page. A query that
// does not parse returns an *Error with status 400 (ErrInvalid) without
// a round trip.
func (c *Client) Query(ctx context.Context, query string, opts QueryOptions) (*QueryPage, error) {
	q, err := tw.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	if q.Aggregate() {
		return c.aggregate(ctx, q, query)
	}
	pageSize, continuation := opts.PageSize, opts.Continuation
	left := 0 // TOP n: the results still to come
	if q.Top > 0 {
		// TOP n: the first n results, in pages of the page size; the
		// continuation carries how many are left.
		left = q.Top
		if continuation != "" {
			if continuation, left, err = splitTopContinuation(continuation, q.Top); err != nil {
				return nil, err
			}
		}
		if pageSize <= 0 {
			pageSize = DefaultPageSize
		}
		pageSize = min(pageSize, left)
	}
	items, next, err := c.pages(ctx, &Request{Op: tw.OpQuery, Body: []byte(query)}, pageSize, continuation)
	if !usable(err) {
		return nil, err
	}
	if q.Top > 0 {
		if left -= len(items); left > 0 && next != "" {
			next = topContinuation(next, left)
		} else {
			next = ""
		}
	}
	page := &QueryPage{Items: make([]json.RawMessage, len(items)), Continuation: next}
	for i, it := range items {
		page.Items[i] = it
	}
	return page, err
}

// aggregate asks every shard for its groups, in parallel, and merges them.
func (c *Client) aggregate(ctx context.Context, q *tw.Query, text string) (*QueryPage, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	shards, err := c.route(ctx, false)
	if err != nil {
		return nil, err
	}
	lists := make([][]tw.Group, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := c.doIndex(ctx, i, len(shards), &Request{Op: tw.OpQuery, Body: []byte(text)})
			if usable(err) {
				var derr error
				if lists[i], derr = tw.DecodeGroups(rep.Body); derr != nil {
					err = derr
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	err = errors.Join(errs...)
	if !allUsable(errs) {
		return nil, err
	}
	page := &QueryPage{Aggregate: true}
	for _, row := range q.AggregateRows(tw.MergeGroups(lists...)) {
		if q.Top > 0 && len(page.Items) == q.Top {
			break // TOP n of GROUP BY: the first n groups
		}
		page.Items = append(page.Items, row)
	}
	return page, err
}

// allUsable reports whether every read's result may be used (usable).
func allUsable(errs []error) bool {
	for _, err := range errs {
		if !usable(err) {
			return false
		}
	}
	return true
}

// doIndex sends req to global shard i of a layout of n shards, looking
// the route up again (once) when the owner refuses. The reply's own
// error is returned as the error.
func (c *Client) doIndex(ctx context.Context, i, n int, req *Request) (*Reply, error) {
	var lastErr error
	var ref shardRef
	for attempt := 0; attempt < 2; attempt++ {
		shards, err := c.route(ctx, attempt > 0)
		if err != nil {
			return nil, err
		}
		if len(shards) != n {
			return nil, fmt.Errorf("%w: the shard layout changed (%d shards, was %d)", ErrBadContinuation, len(shards), n)
		}
		ref = shards[i]
		rep, hung, err := c.doMaster(ctx, ref, req)
		if err == nil {
			if rep.Err != nil {
				return nil, rep.Err
			}
			return rep, nil
		}
		lastErr = err
		if hung {
			c.refreshSoon()
			break
		}
		if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			break
		}
	}
	rep, err := c.fromReplica(ctx, ref, req, lastErr)
	if !usable(err) {
		return nil, err
	}
	return rep, err
}

// pages reads one page of a paged read (ListDevices, a query listing)
// shard after shard from the position of the continuation token.
func (c *Client) pages(ctx context.Context, base *Request, pageSize int, continuation string) ([][]byte, string, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	shards, err := c.route(ctx, false)
	if err != nil {
		return nil, "", err
	}
	n := len(shards)
	s, after := 0, ""
	if continuation != "" {
		if s, after, err = decodeContinuation(continuation, n); err != nil {
			return nil, "", err
		}
	}
	var items [][]byte
	var stale []error // shards read from a slave's replica (ErrStale)
	for s < n {
		req := *base
		req.After, req.Limit = after, pageSize-len(items)
		rep, err := c.doIndex(ctx, s, n, &req)
		if !usable(err) {
			return nil, "", err
		}
		if err != nil {
			stale = append(stale, err)
		}
		var raw []json.RawMessage
		if err := json.Unmarshal(rep.Body, &raw); err != nil {
			return nil, "", fmt.Errorf("%w: page from shard %d: %w", ErrFailed, s, err)
		}
		for _, r := range raw {
			items = append(items, r)
		}
		if rep.Next != "" {
			after = rep.Next
			if len(items) >= pageSize {
				return items, encodeContinuation(n, s, after), errors.Join(stale...)
			}
			continue
		}
		s, after = s+1, ""
		if len(items) >= pageSize && s < n {
			return items, encodeContinuation(n, s, ""), errors.Join(stale...)
		}
	}
	return items, "", errors.Join(stale...)
}

// Continuation token (format 1): the unpadded URL-safe base64 of
//
//	FORMAT  1
//	SHARDS  uvarint: the number of global shards the token was made for
//	SHARD   uvarint: the global shard to continue in
//	AFTER   uvarint length, then the key to continue after ("" = from the start)
//
// and, for SELECT TOP n, format 2: the same fields after FORMAT 2, then
//
//	LEFT    uvarint: the results of the n still to come (1..n)
//
// TestTwinContinuationPinned pins an example of each.
func encodeContinuation(shards, shard int, after string) string {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(shards))
	b = binary.AppendUvarint(b, uint64(shard))
	b = binary.AppendUvarint(b, uint64(len(after)))
	b = append(b, after...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// topContinuation turns tok, a format 1 token, into the format 2 token
// of a TOP n query with left results to come.
func topContinuation(tok string, left int) string {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 1 {
		return "" // not from encodeContinuation: cannot happen
	}
	b[0] = 2
	return base64.RawURLEncoding.EncodeToString(binary.AppendUvarint(b, uint64(left)))
}

// splitTopContinuation reads the format 2 token tok of a TOP top query:
// the format 1 token of its position and the results left (1..top).
func splitTopContinuation(tok string, top int) (string, int, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 1 || b[0] != 2 {
		return "", 0, fmt.Errorf("%w: %s (not of a TOP query)", ErrBadContinuation, quoteToken(tok))
	}
	v, after, rest, ok := tokenFields(b[1:])
	var left uint64
	if ok {
		var k int
		left, k = binary.Uvarint(rest)
		ok = k > 0 && k == len(rest)
	}
	if !ok || left < 1 || left > uint64(top) || v[1] >= v[0] {
		return "", 0, fmt.Errorf("%w: %s", ErrBadContinuation, quoteToken(tok))
	}
	return encodeContinuation(int(v[0]), int(v[1]), after), int(left), nil
}

// tokenFields reads SHARDS, SHARD and AFTER (its length in v[2]) of a
// token after its FORMAT; rest is what follows.
func tokenFields(b []byte) (v [3]uint64, after string, rest []byte, ok bool) {
	for i := range v {
		x, k := binary.Uvarint(b)
		if k <= 0 {
			return v, "", nil, false
		}
		v[i], b = x, b[k:]
	}
	if v[2] > uint64(len(b)) {
		return v, "", nil, false
	}
	return v, string(b[:v[2]]), b[v[2]:], true
}

func decodeContinuation(tok string, shards int) (int, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 1 || b[0] != 1 {
		return 0, "", fmt.Errorf("%w: %s", ErrBadContinuation, quoteToken(tok))
	}
	v, after, rest, ok := tokenFields(b[1:])
	if !ok || len(rest) != 0 {
		return 0, "", fmt.Errorf("%w: %s", ErrBadContinuation, quoteToken(tok))
	}
	if v[0] != uint64(shards) || v[1] >= v[0] {
		return 0, "", fmt.Errorf("%w: made for %d shards, there are %d", ErrBadContinuation, v[0], shards)
	}
	return int(v[1]), after, nil
}

// maxQuotedToken is how much of a bad continuation token its error
// quotes: the token comes from a request header (up to the HTTP server's
// header limit), and the error goes back in the 400.
const maxQuotedToken = 64

// quoteToken quotes tok for an error, cut to maxQuotedToken bytes.
func quoteToken(tok string) string {
	if len(tok) <= maxQuotedToken {
		return strconv.Quote(tok)
	}
	return strconv.Quote(tok[:maxQuotedToken]) + fmt.Sprintf("... (%d bytes)", len(tok))
}
