package advisory

// This file ports PostgreSQL's hash_bytes and hash_bytes_extended
// (src/common/hashfn.c), which are Bob Jenkins' lookup3 mix and final steps
// as adapted for PostgreSQL. The adaptation is not byte-identical to
// lookup3's hashlittle: the initial state adds 3923095, and the tail puts
// the last three bytes in the upper three bytes of c.
//
// On a little-endian server the aligned path (word loads) and the unaligned
// path (byte loads) produce the same value, so one byte-wise little-endian
// reading of the key covers both.

// hashInit is the initial value of PostgreSQL's a, b and c before the length
// is added.
const hashInit = 0x9e3779b9 + 3923095

// HashText returns what PostgreSQL's hashtext(s) returns on a little-endian
// server: the 32-bit hash_bytes of the bytes of s, as a signed int32.
//
// The value equals the server's on every little-endian server, which covers
// all mainstream platforms (x86-64, arm64, ppc64le). A big-endian server
// (such as s390x) computes a different value. So a key can be computed on
// the client, with no round trip to the server.
//
// Hand-written SQL often takes a lock as
//
//	SELECT pg_advisory_lock(ns, hashtext('name'));
//
// and [NameKey] uses HashText, so the two take the same lock.
//
// The hash covers the bytes of s exactly as PostgreSQL stores the text: UTF-8
// in a UTF8 database, with no normalization. This matches the server for
// deterministic collations, including the default one, which hash the raw
// bytes. A nondeterministic collation hashes a sort key instead. PostgreSQL
// text cannot contain a NUL byte, so a string with one has no server
// equivalent.
func HashText(s string) int32 {
	l := uint32(len(s))
	_, c := hashBytes(s, hashInit+l, hashInit+l, hashInit+l)
	return int32(c)
}

// HashTextExtended returns what PostgreSQL's hashtextextended(s, seed)
// returns on a little-endian server: the 64-bit hash_bytes_extended of the
// bytes of s, as a signed int64.
//
// As with [HashText], the value equals the server's on little-endian servers
// (all mainstream platforms), so a key can be computed on the client with no
// round trip. It has 64 bits, not 32, so distinct names are far less likely
// to collide. Use it with [Int64Key] for a one-argument lock:
//
//	SELECT pg_advisory_lock(hashtextextended('name', 0));
//
// A seed of 0 means no seed. With seed 0, the low 32 bits of the result
// equal HashText(s), as they do on the server.
func HashTextExtended(s string, seed int64) int64 {
	l := uint32(len(s))
	a, b, c := hashInit+l, hashInit+l, hashInit+l
	if seed != 0 {
		// PostgreSQL treats the seed as a 12-byte chunk of data whose
		// last four bytes are zero.
		a += uint32(uint64(seed) >> 32)
		b += uint32(seed)
		a, b, c = mix(a, b, c)
	}
	b, c = hashBytes(s, a, b, c)
	return int64(uint64(b)<<32 | uint64(c))
}

// hashBytes runs the body of hash_bytes over s from the state (a, b, c) and
// returns b and c after the final mix.
func hashBytes(s string, a, b, c uint32) (uint32, uint32) {
	for len(s) >= 12 {
		a += le32(s)
		b += le32(s[4:])
		c += le32(s[8:])
		a, b, c = mix(a, b, c)
		s = s[12:]
	}

	// The last 0 to 11 bytes. The lowest byte of c is left for the
	// length, which went into the initial state, so bytes 8 to 10 go in
	// the upper three bytes of c.
	switch len(s) {
	case 11:
		c += uint32(s[10]) << 24
		fallthrough
	case 10:
		c += uint32(s[9]) << 16
		fallthrough
	case 9:
		c += uint32(s[8]) << 8
		fallthrough
	case 8:
		b += le32(s[4:])
		a += le32(s)
	case 7:
		b += uint32(s[6]) << 16
		fallthrough
	case 6:
		b += uint32(s[5]) << 8
		fallthrough
	case 5:
		b += uint32(s[4])
		fallthrough
	case 4:
		a += le32(s)
	case 3:
		a += uint32(s[2]) << 16
		fallthrough
	case 2:
		a += uint32(s[1]) << 8
		fallthrough
	case 1:
		a += uint32(s[0])
	}

	_, b, c = final(a, b, c)
	return b, c
}

// le32 reads the first four bytes of s as a little-endian uint32. It is
// binary.LittleEndian.Uint32 for a string: indexing the string directly
// avoids a []byte conversion, and the compiler merges the four byte loads
// into one 32-bit load.
func le32(s string) uint32 {
	_ = s[3] // one bounds check instead of four
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// rotl is rot in hashfn.c: rotate x left by k bits.
func rotl(x uint32, k uint) uint32 {
	return x<<k | x>>(32-k)
}

// mix mixes three 32-bit values reversibly. It is mix in hashfn.c.
func mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= rotl(c, 4)
	c += b
	b -= a
	b ^= rotl(a, 6)
	a += c
	c -= b
	c ^= rotl(b, 8)
	b += a
	a -= c
	a ^= rotl(c, 16)
	c += b
	b -= a
	b ^= rotl(a, 19)
	a += c
	c -= b
	c ^= rotl(b, 4)
	b += a
	return a, b, c
}

// final mixes three 32-bit values into c, and b less thoroughly. It is
// final in hashfn.c.
func final(a, b, c uint32) (uint32, uint32, uint32) {
	c ^= b
	c -= rotl(b, 14)
	a ^= c
	a -= rotl(c, 11)
	b ^= a
	b -= rotl(a, 25)
	c ^= b
	c -= rotl(b, 16)
	a ^= c
	a -= rotl(c, 4)
	b ^= a
	b -= rotl(a, 14)
	c ^= b
	c -= rotl(b, 24)
	return a, b, c
}
