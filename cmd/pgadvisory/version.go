package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

var cmdVersion = &command{
	name:      "version",
	usageLine: "version",
	short:     "print pgadvisory's version",
	long:      helpVersion,
	run:       runVersion,
}

const helpVersion = `
Version prints pgadvisory's version, as the Go toolchain recorded it in
the binary, and the Go version it was built with. "pgadvisory --version"
does the same. A binary installed with "go install ...@v1.2.3" shows
v1.2.3; one built from a clone shows devel, with the commit when the build
recorded it.
`

func runVersion(ctx context.Context, e *env, cmd *command, args []string) int {
	fs := newFlagSet(e, cmd)
	if code := parseFlags(e, cmd, fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, cmd, "unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintln(e.stdout, versionLine(debug.ReadBuildInfo()))
	return exitOK
}

// versionLine returns the line that version prints, from the build
// information of the binary: "pgadvisory v1.2.3 go1.26.0", or
// "pgadvisory devel (abc123def456, modified) go1.26.0" for a build from a
// clone, or "pgadvisory devel go1.26.0" when nothing was recorded.
func versionLine(info *debug.BuildInfo, ok bool) string {
	version, goVersion := "devel", runtime.Version()
	if !ok || info == nil {
		return fmt.Sprintf("pgadvisory %s %s", version, goVersion)
	}
	if info.GoVersion != "" {
		goVersion = info.GoVersion
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return fmt.Sprintf("pgadvisory %s %s", v, goVersion)
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if revision == "" {
		return fmt.Sprintf("pgadvisory %s %s", version, goVersion)
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	return fmt.Sprintf("pgadvisory %s (%s%s) %s", version, revision, modified, goVersion)
}
