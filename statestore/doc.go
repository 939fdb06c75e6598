// Package statestore is the engine of SmartGo's key-value state store: the
// store that MQTT 5 clients (the Azure IoT Operations state store SDKs
// among them) reach by RPC on RequestTopic. It holds the RESP3 codec, the
// hybrid logical clock, the commands with their conditions, fencing
// tokens, expiry, quotas, KEYNOTIFY registrations and notifications, and a
// response cache for redelivered requests. It does no I/O: time comes in
// as arguments, bytes in and out as slices, and it imports nothing from
// SmartGo. The wire rules it follows are summed up in docs/protocols.md
// ("State store over MQTT 5") and pinned by this package's tests.
//
// # Calling protocol
//
// One Engine serves one shard (ShardOf picks the shard of a key). The
// owner of the shard on the master runs, for each request in arrival
// order:
//
//	req := &statestore.Request{Payload: p, ClientID: id,
//	        DedupKey: statestore.DedupKey(corr, respTopic), DedupTTL: expiry}
//	if cmd, err := statestore.ParseCommand(p); err == nil {
//	        req.Command = &cmd // parsed once: ShardOf(cmd.Key, n) picks the shard, Prepare reuses it
//	}
//	for _, up := range userProps { req.SetUserProperty(up.Key, up.Value) }
//	entry, out, needsLog := eng.Prepare(req, time.Now())
//	if needsLog {
//	        storeTime := appendToLog(entry)   // the log record's store time
//	        out, err = eng.Apply(entry, storeTime)  // err: fail-stop
//	}                                         // (ApplyOwn: entry never left memory)
//	respond(out.Reply)                        // Payload + Reply.UserProperties()
//	for _, n := range out.Notifications { push(n.ClientID, n.Topic(), n.Payload(), n.UserProperties()) }
//
// Before Prepare the front end checks the MQTT envelope: __protVer
// (ProtocolVersionSupported; otherwise answer UnsupportedVersionProperties
// with status 505), the response topic (ForbiddenResponseTopic) and the
// correlation data. Responses go to the request's response topic exactly
// as sent, with its correlation data, content type ContentType and the
// Reply's user properties (__stat=200 always, __protVer, __ts). Each
// notification is pushed into the session of the client that registered
// it, whether or not that client subscribed to the notify topic, and the
// front end calls DropClient when the client disconnects.
//
// A slave, or a master restarting, calls Restore with the latest snapshot
// and then Apply for every entry logged after it, with each record's store
// time; Apply never reads a clock, so every replica reaches the same state
// (Snapshot bytes are equal). Replicas have no KEYNOTIFY registrations and
// so produce no notifications: a front end registers its clients' watches
// again on a promoted replica, from the Clock it read when each was
// registered (KEYNOTIFY ... SINCE, against the replicated change history). To expire keys on time the master asks
// NextExpiry, and when it is due logs the entry PrepareExpire returns;
// every applied entry also removes the keys due at its store time, and
// reads (GET) treat a key past its expiry as absent at once. Store times
// should come from the clock that gives Prepare its now: an expire entry
// stored before the due time expires nothing, and NextExpiry keeps
// reporting the (past) due time until an entry stored after it applies.
//
// Prepare assigns each mutation its version (an HLC greater than the
// request's __ts and than every earlier version) and puts it in the entry,
// but decides nothing that depends on the table: conditions (NX, NEX, the
// VDEL value), fencing tokens and quotas are decided by Apply against the
// state at that point of the log, so several entries may be in flight. A
// change's version is the entry's version, or the successor of the newest
// applied version if that is not older (when one entry also expires keys).
//
// Replies (Reply.Payload; __ts is Reply.Version when not zero):
//
//	SET applied             +OK            the new version
//	SET not applied (NX/NEX) :-1           the key's current version
//	GET hit / miss          $<n> <value> / $-1     the key's version / none
//	DEL, VDEL deleted       :1             the version the key had
//	DEL, VDEL missing       :0             none
//	VDEL value differs      :-1            the key's version
//	KEYNOTIFY               +OK; STOP of a key not watched :0      none
//	errors                  -ERR <text>    none (the ServiceError texts)
//
// Checks run in this order and the first failure is the reply: response
// cache hit; RESP shape; verb; arity; options; empty key; key or value
// larger than MaxKeySize/MaxValueSize (quota text); __ts (malformed, too
// far ahead, missing on SET); __ft on SET/DEL/VDEL (malformed, too far
// ahead). Apply then checks the fencing token, the condition and the
// quotas (MaxKeys, MaxBytes), in that order. Failures change nothing.
//
// Quota: every quota failure uses the protocol's text "the quota has been
// exceeded", including a key or value over its size limit, a client over
// MaxWatchesPerClient, and a KEYNOTIFY of a key whose notification topic
// (NotifyTopic: the client id and the key in hex) would be longer than
// MQTT's 65535 bytes (NotifyTopicLen, MaxTopicLen).
//
// # Fencing
//
// A SET carrying __ft on a key that has no token stores the token with the
// key (if the SET applies). On a key that has one, SET, DEL and VDEL
// without __ft fail with ErrFencingRequired, with an older __ft with
// ErrFencingStale; an equal or newer __ft passes and a SET keeps the newer
// of the two. The token lives and dies with the key.
//
// # Extensions (SmartGo only; real clients never send them)
//
//	KEYNOTIFY <prefix> PREFIX            watch every key starting with <prefix>
//	KEYNOTIFY <prefix> PREFIX STOP       stop that watch (+OK, or :0 if absent)
//	KEYNOTIFY <key> SINCE <hlc>          watch <key> and replay its changes after <hlc>
//	KEYNOTIFY <prefix> PREFIX SINCE <hlc>
//
// Options are case-insensitive and may come in any order; STOP excludes
// SINCE. A client watching a key both exactly and by prefix gets one
// notification per change. With SINCE the reply is +OK and
// Outcome.Notifications holds, oldest first, every change newer than <hlc>
// still in the bounded change history (HistoryLen, HistoryBytes); a client
// resumes by passing the __ts of the last notification it saw. If changes
// newer than <hlc> may have left the history the reply is
// "-ERR the requested version is no longer in the change history" and
// nothing is registered; the client then reads the keys and watches
// without SINCE. A malformed <hlc> is "malformed timestamp". The front end
// must deliver the backlog in order with the notices of the changes
// applied after the registration (the broker pushes it through the
// shard's notification queue, ahead of the reply).
//
// # Log entry (format 1)
//
// All integers are big-endian. An HLC is WALL int64 ms, COUNTER uint64,
// NODELEN uint8 n (1..255), NODE n bytes: 17+n bytes.
//
//	size   field
//	   1   MAGIC     0x53 ('S')
//	   1   FORMAT    1
//	   1   OP        1 SET, 2 DEL, 3 VDEL, 4 EXPIRE
//	   1   FLAGS     0x01 NX, 0x02 NEX, 0x04 PX, 0x08 FT, 0x10 DEDUP; other bits 0
//	17+n   VERSION   HLC assigned by Prepare
//	   8   PX        int64 ms, > 0                 if FLAGS&PX (SET only)
//	17+n   FT        HLC, the __ft                 if FLAGS&FT (not EXPIRE)
//	 4+k   KEY       uint32 k >= 1, k bytes        unless EXPIRE
//	 4+v   VALUE     uint32 v, v bytes             SET and VDEL only
//	 4+d   DEDUP     uint32 d, d bytes             if FLAGS&DEDUP
//	   8   DEDUPTTL  int64 ms, > 0                 if FLAGS&DEDUP
//	   4   CRC       CRC32-C (Castagnoli) of every byte before it
//
// NX and NEX exclude each other and, like PX, belong to SET only. Lengths
// are at most 256 MiB. Nothing follows CRC. TestStateStoreEntryBytesPinned
// pins an example.
//
// DEDUP names the response cache's entry for the request: 17 bytes, 0x01
// then the first 16 bytes of the SHA-256 of the request's
// DedupKey(correlation data, response topic). Entries of builds before
// the twelfth session hold the DedupKey itself (its first byte is 0, the
// top of the correlation data's length); Apply hashes such a field, so
// the reply it cached still answers the request's redelivery.
//
// # Snapshot (format 1)
//
// Integers big-endian, HLC as above; an optional HLC that is absent is 17
// zero bytes. A field is uint32 length then bytes.
//
//	size   field
//	   8   MAGIC      "SGSTATE\x00"
//	   4   FORMAT     1
//	17+n   APPLIED    newest applied version (optional)
//	17+n   HISTFLOOR  newest version evicted from the history (optional)
//	   8   NKEYS      uint64, then per key in ascending byte order of KEY:
//	         field KEY (non-empty), field VALUE, HLC VERSION,
//	         int64 EXPIREAT (Unix ms store time, 0 = never), optional HLC TOKEN
//	   8   NHIST      uint64, then per change, oldest first (versions ascending):
//	         HLC VERSION, uint8 OP (1 SET, 2 DELETE), field KEY,
//	         field VALUE (SET only)
//	   8   NCACHE     uint64, then per cached reply, oldest first:
//	         field KEY (as an entry's DEDUP), int64 EXPIREAT (Unix ms
//	         store time), optional HLC VERSION, field PAYLOAD
//	   4   CRC        CRC32-C of every byte before it
//
// Nothing follows CRC. Restore checks the order of keys and history,
// that no version is newer than APPLIED, and the checksum.
// TestStateStoreSnapshotBytesPinned pins an example.
package statestore
