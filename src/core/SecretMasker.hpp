#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace airlock {

// Replaces every secret value with *** in text the API returns or stores:
// the exact value and its base64 and hex (lower and upper case) forms.
// Values shorter than kMinLength are not masked (they would blank out
// ordinary text); the API refuses such secrets.
class SecretMasker {
  public:
    static constexpr std::size_t kMinLength = 4;
    SecretMasker() = default;
    explicit SecretMasker(const std::vector<std::string>& values);
    std::string mask(std::string text) const;
    bool empty() const { return needles_.empty(); }
    // Every form that is masked, longest first.
    const std::vector<std::string>& needles() const { return needles_; }

  private:
    std::vector<std::string> needles_;  // longest first
};

// Every string of a JSON value masked, object keys included (guest-written
// listings, a task's prompt, records bound for an evidence bundle).
nlohmann::json maskJsonStrings(const nlohmann::json& in, const SecretMasker& masker);

}  // namespace airlock
