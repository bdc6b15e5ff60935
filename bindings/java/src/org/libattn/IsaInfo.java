package org.libattn;

/**
 * One kernel ISA the library knows (attn_isa_info): its name, as {@link Attention#setIsa} and
 * the ATTN_ISA environment variable take it, and whether this CPU and build run it. The list, in
 * the library's order (weakest first): {@link Attention#isaInfo()}. Immutable.
 */
public final class IsaInfo {
    private final String name;
    private final boolean supported;

    IsaInfo(String name, boolean supported) {
        this.name = name;
        this.supported = supported;
    }

    /** The ISA's name ("scalar", "sse2", ...). */
    public String name() {
        return name;
    }

    /** True if this CPU and build run it: {@link Attention#setIsa}(name()) then succeeds. */
    public boolean isSupported() {
        return supported;
    }

    /** "name" or "name (unsupported)". */
    @Override
    public String toString() {
        return supported ? name : name + " (unsupported)";
    }
}
