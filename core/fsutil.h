// Small file helpers: read, atomic write (temp + fsync + rename), directories.
#pragma once
#include <string>

namespace kb {

std::string read_file(const std::string& path);  // throws InputError naming the path
bool file_exists(const std::string& path);
// mkdir -p; a file in the way (the path or a folder above it) is an InputError, other failures EnvError.
void make_dirs(const std::string& path);
// Writes to path.tmp.<pid>, fsyncs, renames over path, fsyncs the directory.
void write_file_atomic(const std::string& path, const std::string& data);
// Appends one line and fsyncs (journals).
void append_line_fsync(const std::string& path, const std::string& line);
std::string temp_dir(const std::string& prefix);  // mkdtemp under $TMPDIR
void remove_tree(const std::string& path);
// $XDG_CACHE_HOME/kbisect, or ~/.cache/kbisect; KBISECT_CACHE_DIR overrides.
std::string default_cache_dir();
std::string executable_path();                   // /proc/self/exe

}  // namespace kb
