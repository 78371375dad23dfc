#include "GuestInit.hpp"

int main() {
    airlock::init::GuestInit init;
    init.run();
}
