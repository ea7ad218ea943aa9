#include "backends/triton/expr.h"

#include <cctype>

#include <fmt/format.h>

#include "core/error.h"

namespace kb::triton {
namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

// Recursive descent over: sum := term (('+'|'-') term)*; term := unary (('*'|'/'|'//'|'%') unary)*;
// unary := '-' unary | atom; atom := int | name | name '(' args ')' | '(' sum ')'.
class Parser {
 public:
  Parser(const std::string& text, const Bindings* names, std::vector<std::string>* seen)
      : s_(text), names_(names), seen_(seen) {}

  int64_t parse() {
    int64_t v = sum();
    skip();
    if (i_ != s_.size()) fail(fmt::format("unexpected '{}'", s_.substr(i_, 1)));
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(fmt::format("expression '{}': {} (at column {})", s_, why, i_ + 1));
  }
  void skip() {
    while (i_ < s_.size() && isspace((unsigned char)s_[i_])) ++i_;
  }
  bool eat(const char* tok) {
    skip();
    const std::string t(tok);
    if (s_.compare(i_, t.size(), t) != 0) return false;
    i_ += t.size();
    return true;
  }
  int64_t divisor(int64_t d, const char* op) const {
    if (d == 0) fail(fmt::format("'{}' by zero", op));
    return d;
  }
  int64_t sum() {
    int64_t v = term();
    for (;;) {
      if (eat("+")) v += term();
      else if (eat("-")) v -= term();
      else return v;
    }
  }
  int64_t term() {
    int64_t v = unary();
    for (;;) {
      if (eat("//")) v = floor_div(v, divisor(unary(), "//"));
      else if (eat("/")) v = floor_div(v, divisor(unary(), "/"));
      else if (eat("*")) v *= unary();
      else if (eat("%")) v = floor_mod(v, divisor(unary(), "%"));
      else return v;
    }
  }
  int64_t unary() { return eat("-") ? -unary() : atom(); }
  int64_t atom() {
    skip();
    if (eat("(")) {
      int64_t v = sum();
      if (!eat(")")) fail("missing ')'");
      return v;
    }
    if (i_ < s_.size() && isdigit((unsigned char)s_[i_])) {
      size_t j = i_;
      while (j < s_.size() && isdigit((unsigned char)s_[j])) ++j;
      int64_t v = std::stoll(s_.substr(i_, j - i_));
      i_ = j;
      return v;
    }
    if (i_ < s_.size() && (isalpha((unsigned char)s_[i_]) || s_[i_] == '_')) {
      size_t j = i_;
      // A name may be dotted (opt.num_warps: kbisect's compile options, docs/triton.md).
      auto name_char = [&](size_t k) {
        return isalnum((unsigned char)s_[k]) || s_[k] == '_' ||
               (s_[k] == '.' && k + 1 < s_.size() && (isalpha((unsigned char)s_[k + 1]) || s_[k + 1] == '_'));
      };
      while (j < s_.size() && name_char(j)) ++j;
      const std::string name = s_.substr(i_, j - i_);
      i_ = j;
      if (eat("(")) return call(name);
      return lookup(name);
    }
    fail(i_ < s_.size() ? fmt::format("unexpected '{}'", s_.substr(i_, 1)) : "unexpected end");
  }
  int64_t call(const std::string& fn) {
    std::vector<int64_t> args;
    if (!eat(")")) {
      do args.push_back(sum());
      while (eat(","));
      if (!eat(")")) fail(fmt::format("missing ')' after the arguments of {}", fn));
    }
    auto want = [&](size_t n) {
      if (args.size() != n) fail(fmt::format("{} takes {} arguments, not {}", fn, n, args.size()));
    };
    if (fn == "cdiv") {
      want(2);
      return floor_div(args[0] + divisor(args[1], "cdiv") - 1, args[1]);
    }
    if (fn == "min" || fn == "max") {
      if (args.empty()) fail(fn + " needs arguments");
      int64_t v = args[0];
      for (int64_t a : args) v = fn == "min" ? std::min(v, a) : std::max(v, a);
      return v;
    }
    fail(fmt::format("unknown function '{}' (cdiv, min, max)", fn));
  }
  int64_t lookup(const std::string& name) {
    if (seen_) seen_->push_back(name);
    if (!names_) return 1;
    auto it = names_->find(name);
    if (it == names_->end()) {
      std::string known;
      for (const auto& [k, v] : *names_) known += (known.empty() ? "" : ", ") + k;
      fail(fmt::format("unknown name '{}' (known: {})", name, known));
    }
    return it->second;
  }

  const std::string& s_;
  const Bindings* names_;
  std::vector<std::string>* seen_;
  size_t i_ = 0;
};

}  // namespace

int64_t eval_int(const std::string& text, const Bindings& names) { return Parser(text, &names, nullptr).parse(); }

std::vector<std::string> expr_names(const std::string& text) {
  std::vector<std::string> seen;
  try {
    Parser(text, nullptr, &seen).parse();
  } catch (const InputError&) {
    // a division by zero of the placeholder values says nothing about the names
  }
  return seen;
}

}  // namespace kb::triton
