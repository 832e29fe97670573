// Adds (or updates) SCRAM-SHA-512 users on a running broker through the Admin API: one
// `name=password` per line on stdin, so no password is on a command line. kafka.sh runs
// it from source (java ScramUsers.java, a JDK) once, to migrate a PLAINTEXT data dir.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;

public class ScramUsers {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        List<UserScramCredentialAlteration> users = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            int eq = line.indexOf('=');
            if (eq <= 0) continue;
            users.add(new UserScramCredentialUpsertion(line.substring(0, eq),
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), line.substring(eq + 1)));
        }
        try (Admin admin = Admin.create(props)) {
            admin.alterUserScramCredentials(users).all().get();
        }
        System.out.println("added SCRAM users: " + users.size());
    }
}
