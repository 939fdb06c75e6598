// Package record is the byte-level codec of RocketMQ 4.x messages as SmartGo
// stores and serves them: the commitlog record (which is also the pull
// response wire format), the end-of-segment filler, the properties string,
// the SEND_BATCH_MESSAGE body, the two message id formats, the tag hash and
// body compression. It is pure: bytes in, bytes out, no files or sockets.
//
// Every format below is FROZEN: it is what RocketMQ 4.x clients and brokers
// read and write, and what SmartGo segments already on disk contain. The
// constants that describe it (magics, offsets, flag bits, limits, property
// keys, id widths) must never change; record_test.go pins the bytes.
// All integers are big-endian; "int" below means a 4-byte two's-complement
// integer, "long" 8 bytes, "short" 2, "byte" 1 (signed where noted).
//
// # Commitlog record (v1, magic 0xDAA320A7)
//
// Both hosts IPv4 (SYSFLAG bits 0x10 and 0x20 clear):
//
//	offset size field
//	     0    4 TOTALSIZE        int, whole record including this field
//	     4    4 MAGICCODE        0xDAA320A7
//	     8    4 BODYCRC          CRC32-IEEE(BODY as stored) & 0x7FFFFFFF
//	    12    4 QUEUEID          int
//	    16    4 FLAG             int, user flag
//	    20    8 QUEUEOFFSET      long, logical offset in the consume queue
//	    28    8 PHYSICALOFFSET   long, commitlog offset of this record
//	    36    4 SYSFLAG          int, bits below
//	    40    8 BORNTIMESTAMP    long, ms since the Unix epoch
//	    48    4 BORNHOST ip      IPv4 address
//	    52    4 BORNHOST port    int (0..65535)
//	    56    8 STORETIMESTAMP   long, ms
//	    64    4 STOREHOST ip     IPv4 address
//	    68    4 STOREHOST port   int
//	    72    4 RECONSUMETIMES   int
//	    76    8 PREPAREDTXOFFSET long, prepared transaction offset
//	    84    4 BODYLEN          int n >= 0
//	    88    n BODY             as sent by the producer (maybe compressed)
//	  88+n    1 TOPICLEN         signed byte t, 0..127
//	  89+n    t TOPIC            UTF-8
//	89+n+t    2 PROPERTIESLEN    signed short p, 0..32767
//	91+n+t    p PROPERTIES       properties string (below)
//
//	TOTALSIZE = 91 + n + t + p
//
// With an IPv6 born host (SYSFLAG 0x10) BORNHOST is 16 address bytes + a
// 4-byte port, shifting every later field by 12; the same holds for the store
// host with SYSFLAG 0x20. Both IPv6:
//
//	offset size field
//	  0..47      as above (TOTALSIZE .. BORNTIMESTAMP)
//	    48   16 BORNHOST ip      IPv6 address
//	    64    4 BORNHOST port    int
//	    68    8 STORETIMESTAMP   long
//	    76   16 STOREHOST ip     IPv6 address
//	    92    4 STOREHOST port   int
//	    96    4 RECONSUMETIMES   int
//	   100    8 PREPAREDTXOFFSET long
//	   108    4 BODYLEN          int n
//	   112    n BODY
//	 112+n    1 TOPICLEN         t
//	 113+n    t TOPIC
//	113+n+t   2 PROPERTIESLEN    p
//	115+n+t   p PROPERTIES
//
//	TOTALSIZE = 91 + n + t + p + 12 per IPv6 host (115 + n + t + p here)
//
// A record is well formed only if its lengths add up to TOTALSIZE exactly.
// (The protocol notes give 99 as the constant term; the field widths, and
// RocketMQ's own encoder, give 91.)
//
// SYSFLAG bits: 0x1 COMPRESSED, 0x2 MULTI_TAGS, 0xC transaction type (0x0
// not transactional, 0x4 PREPARED, 0x8 COMMIT, 0xC ROLLBACK), 0x10
// BORNHOST_V6, 0x20 STOREHOST_V6, 0x40 NEED_UNWRAP, 0x80 INNER_BATCH,
// 0x700 compression type (0x100 LZ4, 0x200 ZSTD, 0x300 ZLIB; 0 with
// COMPRESSED set means zlib, as older clients write).
//
// # Record CRC trailer (sealed records)
//
// BODYCRC covers only the body: damage to TOPIC, QUEUEID, QUEUEOFFSET or
// any other header field would pass it. So SmartGo seals every record it
// writes the way RocketMQ 5 does with enabledAppendPropCRC: the last
// property of PROPERTIES is a CRC of the whole record,
//
//	... PROPERTIES as sent | 0x02 | "__CRC32#" | 0x01 | 10 ASCII digits | 0x02
//	                                 `------------- trailer, 20 bytes -------'
//
// where the 0x02 before the trailer is written only when the properties
// string is not empty and does not already end with one, PROPERTIESLEN and
// TOTALSIZE count the separator and the trailer, and the digits are the
// decimal value of
//
//	CRC32-IEEE(record bytes [0, TOTALSIZE-20)) & 0x7FFFFFFF
//
// least significant digit first, padded with '0' to ten digits (RocketMQ's
// order: 1912040457 is written "7540402191"). The CRC covers every byte
// before the trailer: TOTALSIZE, MAGICCODE, BODYCRC, all header fields,
// body, topic, PROPERTIESLEN and the other properties. The record is still
// a v1 record (same magic, same fields): a RocketMQ 4.x reader sees one
// more property, named as RocketMQ 5 names it. A producer's own
// "__CRC32#" pair is removed before sealing (StripCRCProperty).
//
// Records written before sealing (SmartGo before record CRCs, or
// RocketMQ 4.x) have no trailer and stay readable as legacy records,
// checked by BODYCRC and their structure. A record whose properties end in
// something that is nearly a trailer (six of the eight key bytes in place,
// or only trailer bytes and zeros in the last 20 bytes, or zeros alone) is
// a sealed record whose trailer was damaged, not a legacy one; Verify
// documents the rule.
//
// # Blank filler (magic 0xCBD43194)
//
// When a record does not fit in the rest of a segment, the writer fills the
// rest with a blank and continues in the next segment:
//
//	offset size field
//	     0    4 TOTALSIZE  int, bytes from here to the end of the segment (>= 8)
//	     4    4 MAGICCODE  0xCBD43194
//	     8  ... unspecified (not read)
//
// # Properties string
//
//	key1 0x01 value1 0x02 key2 0x01 value2 ... keyN 0x01 valueN [0x02]
//
// UTF-8 text; Java writes no trailing 0x02, the Go client does. Readers split
// on 0x02 and keep a chunk only if its first 0x01 splits it into a non-empty
// key and a non-empty value; everything else (empty chunks included) is
// skipped. Keys and values never contain 0x01 or 0x02. KEYS holds several
// business keys separated by spaces.
//
// # Batch item (SEND_BATCH_MESSAGE body = items back to back)
//
//	offset size field
//	     0    4 TOTALSIZE      int, this item: 22 + n + p
//	     4    4 MAGICCODE      int, 0 from clients (not checked)
//	     8    4 BODYCRC        int, 0 from clients (not checked)
//	    12    4 FLAG           int, user flag
//	    16    4 BODYLEN        int n >= 0
//	    20    n BODY
//	  20+n    2 PROPERTIESLEN  signed short p >= 0
//	  22+n    p PROPERTIES     properties string of this message
//
// # Offset message id (SendResult.offsetMsgId)
//
//	store host IP (4 or 16 bytes) | store host port (int) | PHYSICALOFFSET (long)
//
// rendered as uppercase hex: 32 characters for IPv4, 56 for IPv6; readers
// accept either case and pick the IP width from the length. Example:
// 127.0.0.1:10911 at offset 0 is 7F00000100002A9F0000000000000000.
//
// # Unique message id (property UNIQ_KEY)
//
//	IP (4, or 16) | pid (short) | class-loader hash (int) | ms since month start (int) | counter (short)
//
// uppercase hex, 32 characters (IPv4) or 56 (IPv6). The month starts at
// 00:00 on day 1 in the producer's local time zone; the counter wraps. The
// Go client writes its last 12 characters in lower case, so ids are compared
// as opaque strings and decoded case-insensitively.
//
// # Tag hash
//
// The consume-queue tagsCode of a message is Java's String.hashCode of its
// TAGS value (h = 31*h + unit over UTF-16 code units, 32-bit wrap-around,
// characters beyond U+FFFF as two surrogate units), sign-extended to 64 bits.
//
// # Compression
//
// Producers compress bodies above 4096 bytes with zlib (RFC 1950) at level
// 5 and set SYSFLAG 0x1|0x300 (Java) or 0x1 (Go client). zstd bodies carry
// 0x1|0x200. The broker stores bodies as sent and never decompresses them.
package record
