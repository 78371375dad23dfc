#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace airlock::cli {

class HttpClient;

// `airlock evidence verify FILE [--key PEM] [--repo DIR]`: checks a bundle
// offline (sums, signature, attestations, manifest; with --repo, the patch
// replayed on the base commit). Without --key the daemon's published keys
// are fetched. Exit status 0 only when every check held.
int runEvidenceVerify(std::vector<std::string> args, HttpClient& client, std::ostream& out,
                      std::ostream& err);
// `airlock evidence seal ID | ls ID | get EVD [-o FILE] | review EVD approve|reject [REASON] |
// verify ...`
int runEvidence(std::vector<std::string> args, HttpClient& client, std::ostream& out,
                std::ostream& err);

}  // namespace airlock::cli
