#include "core/fsutil.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace kb {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(fmt::format("{}: cannot read: {}", path, strerror(errno)));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

void make_dirs(const std::string& path) {
  // A regular file where a directory is wanted (the path itself or a folder above it) is bad input,
  // not a missing environment.
  std::error_code ec;
  for (fs::path p = path; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p, ec) && !fs::is_directory(p, ec))
      throw InputError(fmt::format("{}: cannot create directory: {} exists and is not a directory", path, p.string()));
    if (p == p.parent_path()) break;
  }
  fs::create_directories(path, ec);
  if (ec) throw EnvError(fmt::format("{}: cannot create directory: {}", path, ec.message()));
}

static void fsync_dir(const std::string& dir) {
  int fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

namespace {
// Writes all of `data` to fd, retrying short writes and EINTR; 0 or the errno of the failure.
int write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = write(fd, data.data() + off, data.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    off += size_t(w);
  }
  return 0;
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& data) {
  fs::path p(path);
  if (p.has_parent_path()) make_dirs(p.parent_path().string());
  std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw EnvError(fmt::format("{}: cannot write: {}", tmp, strerror(errno)));
  if (int e = write_all(fd, data)) {
    close(fd);
    unlink(tmp.c_str());
    throw EnvError(fmt::format("{}: write failed: {}", tmp, strerror(e)));
  }
  fsync(fd);
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    unlink(tmp.c_str());
    throw EnvError(fmt::format("{}: rename failed: {}", path, strerror(e)));
  }
  fsync_dir(p.has_parent_path() ? p.parent_path().string() : ".");
}

void append_line_fsync(const std::string& path, const std::string& line) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw EnvError(fmt::format("{}: cannot open for append: {}", path, strerror(errno)));
  std::string data = line;
  if (data.empty() || data.back() != '\n') data += '\n';
  if (int e = write_all(fd, data)) {
    close(fd);
    throw EnvError(fmt::format("{}: append failed: {}", path, strerror(e)));
  }
  fsync(fd);
  close(fd);
}

std::string temp_dir(const std::string& prefix) {
  const char* t = getenv("TMPDIR");
  std::string tmpl = fmt::format("{}/{}XXXXXX", (t && *t) ? t : "/tmp", prefix);
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw EnvError(fmt::format("mkdtemp {} failed: {}", tmpl, strerror(errno)));
  return buf.data();
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::string default_cache_dir() {
  if (const char* d = getenv("KBISECT_CACHE_DIR"); d && *d) return d;
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kbisect";
  const char* home = getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/kbisect";
}

std::string executable_path() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

}  // namespace kb
