package main

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// This file holds what exec tells its command about the connection it
// used, so that psql and other libpq programs under exec reach the same
// server, database and role as pgadvisory did, without being given
// DATABASE_URL or --dsn, which they do not read.

// libpqEnv maps libpq's connection keywords to the environment variables
// libpq reads for them (PostgreSQL's documentation, "Environment
// Variables"). Keywords without a variable (sslpassword, keepalives, ...)
// and pgx's own settings are left out: a child cannot be told them.
var libpqEnv = map[string]string{
	"host":                     "PGHOST",
	"hostaddr":                 "PGHOSTADDR",
	"port":                     "PGPORT",
	"dbname":                   "PGDATABASE",
	"user":                     "PGUSER",
	"password":                 "PGPASSWORD",
	"passfile":                 "PGPASSFILE",
	"require_auth":             "PGREQUIREAUTH",
	"channel_binding":          "PGCHANNELBINDING",
	"service":                  "PGSERVICE",
	"servicefile":              "PGSERVICEFILE",
	"options":                  "PGOPTIONS",
	"application_name":         "PGAPPNAME",
	"sslmode":                  "PGSSLMODE",
	"sslnegotiation":           "PGSSLNEGOTIATION",
	"requiressl":               "PGREQUIRESSL",
	"sslcompression":           "PGSSLCOMPRESSION",
	"sslcert":                  "PGSSLCERT",
	"sslkey":                   "PGSSLKEY",
	"sslcertmode":              "PGSSLCERTMODE",
	"sslrootcert":              "PGSSLROOTCERT",
	"sslcrl":                   "PGSSLCRL",
	"sslcrldir":                "PGSSLCRLDIR",
	"sslsni":                   "PGSSLSNI",
	"requirepeer":              "PGREQUIREPEER",
	"ssl_min_protocol_version": "PGSSLMINPROTOCOLVERSION",
	"ssl_max_protocol_version": "PGSSLMAXPROTOCOLVERSION",
	"min_protocol_version":     "PGMINPROTOCOLVERSION",
	"max_protocol_version":     "PGMAXPROTOCOLVERSION",
	"gssencmode":               "PGGSSENCMODE",
	"krbsrvname":               "PGKRBSRVNAME",
	"gsslib":                   "PGGSSLIB",
	"gssdelegation":            "PGGSSDELEGATION",
	"connect_timeout":          "PGCONNECT_TIMEOUT",
	"client_encoding":          "PGCLIENTENCODING",
	"target_session_attrs":     "PGTARGETSESSIONATTRS",
	"load_balance_hosts":       "PGLOADBALANCEHOSTS",
}

// connEnv returns the variables that name, for a libpq program, the
// connection that dsn and the environment (lookup) gave pgadvisory. cfg is
// pgx's reading of the same, with its defaults filled in.
//
//   - Every keyword dsn sets, that libpq has a variable for, becomes that
//     variable, in place of the one inherited: PGHOST, PGPORT, PGDATABASE,
//     PGUSER, PGSSLMODE, PGAPPNAME and the rest.
//
//   - What neither dsn nor the environment sets is inherited as it is, as
//     the variables pgadvisory itself read are; but PGHOST, PGPORT, PGUSER
//     and PGDATABASE, when nothing names them and no service file is in
//     use, are set to the defaults pgx chose, so that a libpq program
//     compiled with other defaults (another socket directory) reaches the
//     same server.
//
//   - A password is passed only when dsn holds it, as PGPASSWORD: dsn is
//     already in the environment (DATABASE_URL, inherited by the command)
//     or in pgadvisory's argv (--dsn), so this exposes it nowhere new. A
//     password from PGPASSWORD or a password file reaches the command the
//     way it reached pgadvisory. No password file is written: it would
//     outlive a pgadvisory killed by SIGKILL.
//
//   - A server parameter that dsn sets by name (search_path=app,
//     statement_timeout=5s: a setting pgx sends at connect, which libpq
//     has no keyword for) becomes "-c name=value" in PGOPTIONS, after the
//     options dsn or the environment gave, so that the command's sessions
//     run with the same settings as pgadvisory's, each value as pgx read
//     it. pgxpool's pool_
//     settings, which pgx alone would take for server parameters, and
//     PostgreSQL has none of, are left out.
//
// It never puts anything into the command's argv. Settings of dsn that are
// pgx's own have no libpq variable and are not passed.
func connEnv(dsn string, cfg *pgx.ConnConfig, lookup func(string) string) ([]string, error) {
	settings, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	set := map[string]string{}
	var params []string
	for k, v := range settings {
		if name, ok := libpqEnv[k]; ok {
			set[name] = v
		} else if cfg != nil && hasKey(cfg.RuntimeParams, k) && !strings.HasPrefix(k, "pool_") {
			params = append(params, k)
		}
	}
	if len(params) > 0 {
		slices.Sort(params)
		opts, ok := set["PGOPTIONS"]
		if !ok {
			opts = lookup("PGOPTIONS")
		}
		for _, k := range params {
			opts = strings.TrimSpace(opts + " -c " + optionsEscape(k+"="+cfg.RuntimeParams[k]))
		}
		set["PGOPTIONS"] = opts
	}
	if settings["service"] == "" && lookup("PGSERVICE") == "" && cfg != nil {
		defaults := map[string]string{
			"PGHOST":     cfg.Host,
			"PGPORT":     strconv.Itoa(int(cfg.Port)),
			"PGUSER":     cfg.User,
			"PGDATABASE": cfg.Database,
		}
		if cfg.Port == 0 {
			defaults["PGPORT"] = ""
		}
		for name, v := range defaults {
			if _, ok := set[name]; !ok && lookup(name) == "" && v != "" {
				set[name] = v
			}
		}
	}
	out := make([]string, 0, len(set))
	for name, v := range set {
		out = append(out, name+"="+v)
	}
	return out, nil
}

// hasKey reports whether m has k.
func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// optionsEscape escapes a word for libpq's options, which splits them at
// white space unless a backslash escapes it, as it escapes a backslash.
func optionsEscape(w string) string {
	var b strings.Builder
	for _, r := range w {
		if r == '\\' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// parseDSN returns the keywords a connection string sets, as libpq names
// them, in either form: a URL (postgres://user:pw@h1:5432,h2/db?sslmode=x)
// or keyword/value pairs (host=h1,h2 dbname=db). A URL's host and port
// lists become host and port lists, as libpq keeps them. "" sets nothing.
// pgx has accepted dsn before this reads it.
func parseDSN(dsn string) (map[string]string, error) {
	if rest, ok := cutScheme(dsn); ok {
		return parseURLDSN(rest)
	}
	return parseKeywordDSN(dsn)
}

// cutScheme removes a connection URL's scheme.
func cutScheme(dsn string) (string, bool) {
	if rest, ok := strings.CutPrefix(dsn, "postgresql://"); ok {
		return rest, true
	}
	return strings.CutPrefix(dsn, "postgres://")
}

// parseURLDSN reads the part of a connection URL after its scheme, as
// libpq does.
func parseURLDSN(p string) (map[string]string, error) {
	settings := map[string]string{}
	decode := func(s string) (string, error) {
		v, err := url.PathUnescape(strings.Trim(s, " "))
		if err != nil {
			return "", errors.New("a connection URL with a bad percent-encoding")
		}
		return v, nil
	}
	// The user and password end at the last '@' before the path.
	if i := strings.IndexAny(p, "@/"); i >= 0 && p[i] == '@' {
		user, password, hasPassword := strings.Cut(p[:i], ":")
		p = p[i+1:]
		if user != "" {
			v, err := decode(user)
			if err != nil {
				return nil, err
			}
			settings["user"] = v
		}
		if hasPassword && password != "" {
			v, err := decode(password)
			if err != nil {
				return nil, err
			}
			settings["password"] = v
		}
	}
	// host[:port], ... up to the path or the query.
	netloc := p
	if i := strings.IndexAny(p, "/?"); i >= 0 {
		netloc, p = p[:i], p[i:]
	} else {
		p = ""
	}
	if netloc != "" {
		var hosts, ports []string
		anyPort := false
		for _, hp := range strings.Split(netloc, ",") {
			host, port := hp, ""
			if strings.HasPrefix(hp, "[") {
				end := strings.IndexByte(hp, ']')
				if end < 0 {
					return nil, fmt.Errorf("a connection URL with an unterminated IPv6 address")
				}
				host, port = hp[1:end], strings.TrimPrefix(hp[end+1:], ":")
			} else if h, pt, ok := strings.Cut(hp, ":"); ok {
				host, port = h, pt
			}
			h, err := decode(host)
			if err != nil {
				return nil, err
			}
			pt, err := decode(port)
			if err != nil {
				return nil, err
			}
			hosts, ports = append(hosts, h), append(ports, pt)
			anyPort = anyPort || pt != ""
		}
		if strings.Join(hosts, "") != "" {
			settings["host"] = strings.Join(hosts, ",")
		}
		if anyPort {
			settings["port"] = strings.Join(ports, ",")
		}
	}
	if rest, ok := strings.CutPrefix(p, "/"); ok {
		db, query, _ := strings.Cut(rest, "?")
		if db != "" {
			v, err := decode(db)
			if err != nil {
				return nil, err
			}
			settings["dbname"] = v
		}
		p = "?" + query
	}
	if query, ok := strings.CutPrefix(p, "?"); ok && query != "" {
		for _, pair := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(pair, "=")
			key, err := decode(k)
			if err != nil {
				return nil, err
			}
			val, err := decode(v)
			if err != nil {
				return nil, err
			}
			if key == "ssl" && val == "true" {
				key, val = "sslmode", "require"
			}
			settings[key] = val
		}
	}
	return settings, nil
}

// parseKeywordDSN reads keyword/value pairs, as libpq does: a value is
// a run of non-space characters or a single-quoted string, and a
// backslash takes the next character as it is.
func parseKeywordDSN(s string) (map[string]string, error) {
	settings := map[string]string{}
	const space = " \t\n\r\v\f"
	s = strings.TrimLeft(s, space)
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, errors.New("a connection string with a keyword but no value")
		}
		key := strings.TrimRight(s[:eq], space)
		s = strings.TrimLeft(s[eq+1:], space)
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			s = s[1:]
			for {
				if s == "" {
					return nil, errors.New("a connection string with an unterminated quoted value")
				}
				c := s[0]
				s = s[1:]
				if c == '\'' {
					break
				}
				if c == '\\' && s != "" {
					c, s = s[0], s[1:]
				}
				val.WriteByte(c)
			}
		} else {
			for s != "" && !strings.ContainsRune(space, rune(s[0])) {
				c := s[0]
				s = s[1:]
				if c == '\\' {
					if s == "" {
						break
					}
					c, s = s[0], s[1:]
				}
				val.WriteByte(c)
			}
		}
		settings[key] = val.String()
		s = strings.TrimLeft(s, space)
	}
	return settings, nil
}

// Variables that exec sets for the command, besides the connection's.
const (
	envLockKey      = "PGADVISORY_LOCK_KEY"      // the key of the lock held
	envFencingToken = "PGADVISORY_FENCING_TOKEN" // the lease's token, unless --no-fencing
	envSlot         = "PGADVISORY_SLOT"          // with --limit, the slot held, from 0
	envLimit        = "PGADVISORY_LIMIT"         // with --limit, the number of slots
)

// commandEnv returns the environment of exec's command: pgadvisory's own,
// with the connection it used (unless --no-pg-env; see connEnv), the key
// of the lock it holds and, when there is one, the fencing token. The
// PGADVISORY_ variables it inherits are dropped first, so that a command
// under two nested execs sees only the inner one's.
//
// With --dsn, DATABASE_URL is the same DSN when it is a URL, and is
// dropped when it is keyword/value pairs, so that it cannot name another
// database than the one locked.
func commandEnv(e *env, f *execFlags, key *keyArg, h *holding) ([]string, error) {
	var set []string
	unset := []string{envLockKey, envFencingToken, envSlot, envLimit}
	if !f.noPGEnv {
		dsn := *f.dsn
		if dsn == "" {
			dsn = e.getenv("DATABASE_URL")
		} else if _, ok := cutScheme(dsn); ok {
			set = append(set, "DATABASE_URL="+dsn)
		} else {
			unset = append(unset, "DATABASE_URL")
		}
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		conn, err := connEnv(dsn, cfg, e.getenv)
		if err != nil {
			return nil, err
		}
		set = append(set, conn...)
	}
	set = append(set, envLockKey+"="+h.lease.Key().String())
	if t := h.lease.Token(); t != 0 {
		set = append(set, envFencingToken+"="+strconv.FormatInt(t, 10))
	}
	if f.limit > 0 {
		set = append(set, envSlot+"="+strconv.Itoa(h.slot), envLimit+"="+strconv.Itoa(f.limit))
	}
	return withEnv(e.environ(), set, unset), nil
}

// withEnv returns base with the variables named in unset removed and
// those of set ("NAME=value") in place of any of the same name.
func withEnv(base, set, unset []string) []string {
	drop := make(map[string]bool, len(set)+len(unset))
	for _, name := range unset {
		drop[name] = true
	}
	for _, kv := range set {
		name, _, _ := strings.Cut(kv, "=")
		drop[name] = true
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !drop[name] {
			out = append(out, kv)
		}
	}
	slices.Sort(set)
	return append(out, set...)
}
