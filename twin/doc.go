// Package twin is the engine of SmartGo's device and module twins and of
// the identity registry they belong to. One Engine holds one shard: the
// device identities whose id hashes to it (ShardOf), their module
// identities ({deviceId}/{moduleId}, at most MaxModulesPerDevice per
// device) and one twin per identity. It is a deterministic state machine
// fed by a log, like package statestore: it does no I/O, reads no clock
// for its state (time comes from the log record's store time; only the
// rendered cloudToDeviceMessageCount looks at the reading node's clock,
// c2d.go), and imports nothing from SmartGo. The broker hosts the shards on the queues of a system topic;
// client/twin is the Go API; ../docs/twins.md describes the documents
// and the query language for users.
//
// # Calling protocol
//
// The owner of a shard (the broker master) runs, for each request in
// arrival order:
//
//	entry, reply, needsLog := eng.Prepare(req)
//	if needsLog {
//	        storeTime := appendToLog(entry)       // the record's store time
//	        out, err := eng.Apply(entry, storeTime) // err: fail-stop
//	        reply = out.Reply                     // out.Events: to the events topic
//	}                                             // out.Desired: to watching devices
//	respond(reply)
//
// Reads (GetDevice, GetModule, List*, GetTwin, GetProperties, Query) are
// answered by Prepare from the applied state, under a shared lock; a query
// scans in chunks and releases the lock between them. Writes are checked
// by Prepare as far as the request alone allows (ids, JSON, the key,
// string, integer and depth rules, identity fields) and become a log entry
// carrying everything Apply needs, including the SAS keys and generation
// id Prepare drew for a new identity; Apply decides what depends on the
// state (existence, If-Match etags, expected $versions, section sizes
// after the merge, the module quota) and answers with a Reply. A failed
// condition changes nothing. A slave, or a master restarting, calls
// Restore with the latest snapshot and Apply for every entry logged after
// it with each record's store time: every replica reaches the same state
// (equal Snapshot bytes).
//
// # Documents
//
// A twin has root identity fields (deviceId, moduleId, etag, deviceEtag,
// status, statusUpdateTime, connectionState, lastActivityTime, version,
// ...), tags, and properties.desired and properties.reported, each with
// $metadata and $version. Members of a section are kept sorted by name and
// rendered in that order, after which come "$metadata" and "$version".
// $metadata mirrors the tree: every object level and every member has
// $lastUpdated (UTC, milliseconds, the store time of the entry that wrote
// it) and, in desired, $lastUpdatedVersion (the desired $version that
// wrote it). A patch stamps every level on its paths, so the level whose
// member it removed records the removal. Arrays are leaves.
//
// Version numbers: the twin's version starts at 1 and grows with every
// write of tags, desired or reported; its etag is the base64 of the
// version's 8 big-endian bytes ("AAAAAAAAAAE="). desired and reported
// have their own $version, starting at 1 and growing with each write of
// the section. An identity has its own etag (base64 of its decimal
// version), moved by identity updates. Connection changes move neither.
//
// Rules (checked on every request, with the rule's name in the error):
// member names are 1..1024 bytes of UTF-8 without control characters, '.',
// '$' or space (a section root's "$version" and "$metadata" are ignored,
// as clients echo them); strings at most 4096 bytes; integer literals
// within ±2^52; objects and arrays nested at most 10 levels below a
// section's root; tags at most 8 KiB, desired and reported at most 32 KiB
// each after the change, counted as keys' plus values' lengths, strings
// by characters excluding control characters, numbers 8, booleans and
// nulls 4. A request body is at most 256 KiB of JSON.
//
// # Log entry (format 1)
//
// A str is a uvarint length then that many bytes; a uvarint or varint is
// Go's encoding/binary form. A value is the binary value encoding below.
//
//	size  field
//	   1  MAGIC      0x54 ('T')
//	   1  FORMAT     1
//	   1  OP         2 PutDevice, 3 DeleteDevice, 6 PutModule, 7 DeleteModule,
//	                 10 UpdateTwin, 11 ReplaceTwin, 13 PatchReported, 14 SetConnection,
//	                 16 EnqueueC2D, 17 AckC2D
//	   1  FLAGS      0x01 IFMATCH, 0x02 IFVERSION, 0x04 TAGS, 0x08 DESIRED, 0x10 CONNECTED,
//	                 0x20 MODELID (SetConnection with CONNECTED only)
//	 str  DEVICEID   non-empty
//	 str  MODULEID   empty for a device
//	 str  IFMATCH    the normalized If-Match               if FLAGS&IFMATCH
//	uvar  IFVERSION  expected $version, > 0                if FLAGS&IFVERSION
//	      then by OP:
//	      Put*:   MODE u8 (0 upsert, 1 create, 2 update), STATUS u8 (0 enabled,
//	              1 disabled), AUTH u8 (0 sas, 1 selfSigned, 2 certificateAuthority,
//	              3 none), IOTEDGE u8, str STATUSREASON, str MANAGEDBY,
//	              str PRIMARYKEY, str SECONDARYKEY (as requested; may be empty),
//	              str PRIMARYTHUMB, str SECONDARYTHUMB,
//	              str GENPRIMARY, str GENSECONDARY (keys drawn by Prepare, used
//	              when a SAS identity has none), str GENERATIONID
//	      UpdateTwin, ReplaceTwin: TAGS value if FLAGS&TAGS, DESIRED value if
//	              FLAGS&DESIRED (objects; null clears the section)
//	      PatchReported: REPORTED value (an object)
//	      SetConnection: str CONNID (FLAGS&CONNECTED: opened, else closed),
//	              then str MODELID if FLAGS&MODELID: the IoT Plug and Play
//	              model id the device announced on this connection (a
//	              DTMI; without the flag the twin keeps its modelId)
//	      EnqueueC2D: str MESSAGEID (1..128 bytes), varint EXPIRY (Unix ms, > 0),
//	              uvarint MAXDEPTH (1..10000)
//	      AckC2D: str MESSAGEID
//	      Delete*: nothing
//	   4  CRC        CRC32-C (Castagnoli) of every byte before it, big-endian
//
// Nothing follows CRC. TestTwinEntryBytesPinned pins examples.
//
// # Binary value encoding
//
//	KIND u8: 0 null, 1 false, 2 true, 3 number, 4 string, 5 object, 6 array
//	[UPD varint, VER varint]      only in the snapshot's desired and reported
//	                              trees (not for array elements): $lastUpdated
//	                              Unix ms, $lastUpdatedVersion
//	number: 8 bytes IEEE 754 big-endian (finite)
//	string: str
//	object: uvarint N, then N × (str NAME, value); names strictly ascending
//	array:  uvarint N, then N × value (without UPD/VER)
//
// # Snapshot (format 3)
//
//	size  field
//	   8  MAGIC    "SGTWIN\x00\x00"
//	   4  FORMAT   3 (uint32 big-endian)
//	   8  NREC     uint64 big-endian, then per record in ascending key order
//	              (a device before its modules):
//	        str DEVICEID, str MODULEID, varint IDETAG, str GENERATIONID,
//	        u8 STATUS, str STATUSREASON, varint STATUSUPDATED, u8 AUTH,
//	        str PRIMARYKEY, str SECONDARYKEY, str PRIMARYTHUMB, str SECONDARYTHUMB,
//	        u8 IOTEDGE, str MANAGEDBY, u8 CONNECTED, str CONNID,
//	        str MODELID, varint CONNUPDATED, varint LASTACTIVITY, varint VERSION,
//	        varint DESIREDVERSION, varint REPORTEDVERSION,
//	        TAGS value, DESIRED value with metadata, REPORTED value with metadata,
//	        uvarint NC2D (0 for a module; at most 10000), then NC2D ×
//	        (str MESSAGEID, varint EXPIRY): the device's outstanding
//	        cloud-to-device messages in the order they were queued (c2d.go)
//	   4  CRC      CRC32-C of every byte before it
//
// Format 2 is the same without NC2D and what follows it (no message
// outstanding); format 1 is format 2 without MODELID (an empty modelId).
// Restore reads all three. The query index is not in the snapshot; Restore rebuilds it.
// TestTwinSnapshotBytesPinned pins an example of each.
//
// # Wire request (format 1)
//
// The body of the broker request TwinInvoke (remoting code 9120; the shard
// travels in the header field "shard").
//
//	size  field
//	   1  FORMAT     1
//	   1  OP         Op (1..17)
//	   1  FLAGS      0x01 CONNECTED; other bits 0
//	   1  MODE       PutMode
//	 str  DEVICEID
//	 str  MODULEID
//	 str  IFMATCH    as the client sent it (quotes allowed)
//	 var  IFVERSION  varint, 0 = none
//	 str  CONNID
//	 str  AFTER      paging: continue after this key
//	 var  LIMIT      varint, 0 = the engine's page size
//	 str  BODY       JSON (identity, twin patch or document, reported patch, query text,
//	                 C2DEntry of EnqueueC2D and AckC2D);
//	                 for SetConnection the announced model id, or empty
//
// # Wire reply (format 1)
//
//	size  field
//	   1  FORMAT     1
//	uvar  STATUS     HTTP-style (200, 204, 400, 403, 404, 409, 412, 413, ...)
//	 str  CODE       error code; empty on success
//	 str  MESSAGE    error text
//	 str  ETAG
//	 var  VERSION    varint
//	 str  NEXT       paging: the key to continue after; empty = done
//	 str  BODY       JSON
//
// # Wire notification (format 1)
//
// The body of TwinNotify (9121), pushed by a broker to the connection
// that watches the twins: uvarint N, then N × (str DEVICEID, str MODULEID,
// varint VERSION, str PATCH) after the FORMAT byte. PATCH is the JSON a
// device gets on $iothub/twin/PATCH/properties/desired/?$version=VERSION.
// VERSION 0 with an empty PATCH (RevokedVersion; desired versions start
// at 1) is no desired change: the identity was deleted or its device
// disabled, and the front end holding its connection drops it.
//
// # Wire watch (format 1)
//
// The body of TwinWatch (9122): FORMAT, ACTION u8 (1 add, 2 remove,
// 3 replace the connection's whole set, 4 ping), uvarint N, N × str KEY
// (deviceId or deviceId/moduleId). TestTwinWireBytesPinned pins the four
// wire bodies.
package twin
