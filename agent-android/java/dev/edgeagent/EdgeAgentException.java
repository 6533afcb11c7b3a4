package dev.edgeagent;

/**
 * A failure of the Edge Agent library: the command could not be traced, the
 * bytes are not a summary, the spool refused a summary, or the uploader
 * failed. The message says what was wrong. Invalid arguments throw
 * {@link IllegalArgumentException} instead.
 */
public class EdgeAgentException extends Exception {
    private static final long serialVersionUID = 1L;

    public EdgeAgentException(String message) {
        super(message);
    }
}
