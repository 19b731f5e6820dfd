"""The ground floor's small shared I/O: files written atomically, YAML read with line and
column, and commands run with a timeout in their own process group."""
