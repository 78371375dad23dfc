#pragma once
#include <memory>
#include <string>
#include <vector>

#include "controller/MovedSandbox.hpp"
#include "core/SecretCipher.hpp"

namespace airlock {

// A sandbox on its way out: held still (no pause, resume, snapshot or
// delete meanwhile) with its memory image and disk written out.
class OutgoingMove {
  public:
    // Dropped unfinished, the sandbox goes on here as it was.
    virtual ~OutgoingMove() = default;
    virtual const MovedSandbox& sandbox() const = 0;
    // Its memory and device state; its disk as one image over the
    // template's ("" without a disk).
    virtual const std::string& statePath() const = 0;
    virtual const std::string& diskPath() const = 0;
    // The host's commits of its repository workspace, a git pack ("": none).
    virtual const std::string& workspacePath() const = 0;
    // It runs on `node` now: its VM and record here go; what the fleet
    // keeps (its usage, where it lives) is the new host's to update.
    virtual void finish(const std::string& node) = 0;
};

// Moving sandboxes between hosts under the same id, processes and files
// intact (a drain with move): the controller's side of it.
class SandboxMoves {
  public:
    virtual ~SandboxMoves() = default;
    // What a drain moves: every tenant's running sandboxes, and those
    // paused with their memory.
    virtual std::vector<SandboxRecord> movable() = 0;
    // Error(conflict) when it cannot move (gone, mid-change, paused without
    // its memory). Its secrets are sealed
    // with `journey` for the way; its files go into workDir.
    virtual std::unique_ptr<OutgoingMove> moveOut(const std::string& id,
                                                  const SecretCipher& journey,
                                                  const std::string& workDir) = 0;
    // Held for a move now: once the new host answers for it, calls for it
    // go there.
    virtual bool leaving(const std::string& id) = 0;
    // A directory of root's alone on this host's disk for files arriving.
    virtual std::string arrivalsDir() const = 0;
    // Runs what arrived from node `from` here, under its id, in the state
    // it left in. Error(conflict) when this host has the id already or
    // lacks the template build its memory image needs; a repository
    // workspace's errors (its remote no longer has the base). The files are
    // consumed; on failure nothing of it stays here.
    virtual SandboxRecord moveIn(const MovedSandbox& moved, const SecretCipher& journey,
                                 const std::string& statePath, const std::string& diskPath,
                                 const std::string& workspacePath, const std::string& from) = 0;
    // A copy here the fleet does not place here: one that arrived and
    // could not be recorded, or one a crash mid-move left behind after it
    // started on its new node. It goes; its usage stays (it lives elsewhere).
    virtual void dropLocalCopy(const std::string& id, const std::string& why) = 0;
};

}  // namespace airlock
